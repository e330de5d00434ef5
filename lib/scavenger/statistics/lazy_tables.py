"""Tables made when first read: the by-day windows and running/'s prefixes (statistics/window.py) run every
estimator over a window of the stored days, and merging all ~20 tables of each was a third of that time while
their estimators read a few of them and the checks' tables none."""
from __future__ import annotations


class _Pending:
    def __init__(self, make, name):
        self.make, self.name = make, name


class LazyTables(dict):
    """{table: frame} whose frames are made when first read (a by-day window or a running/ prefix: its estimators
    read a few of the ~20 tables, the checks' tables none, and merging them all was a third of their time); what
    is read equals merging every table at once."""

    def __getitem__(self, name):
        value = super().__getitem__(name)
        if isinstance(value, _Pending):
            value = value.make(value.name)
            super().__setitem__(name, value)
        return value

    def get(self, name, default=None):
        return self[name] if name in self else default

    def items(self):
        return [(k, self[k]) for k in list(self.keys())]

    def values(self):
        return [self[k] for k in list(self.keys())]

    def setdefault(self, name, default=None):
        if name not in self:
            super().__setitem__(name, default)
        return self[name]

    def copy(self) -> dict:
        return dict(self.items())
