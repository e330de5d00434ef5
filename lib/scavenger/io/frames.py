"""A pandas frame given as an input (the notebook API), as a pyarrow table of the contract's columns, converted
once. The nested columns are the cost (a week of the README walkthrough's decisions: 2.24M slot dicts): slots are
taken field by field straight into the contract's types and contexts straight into map<string, string>, instead of
pyarrow inferring a type from every value; values of another kind (a number as an ad_id, 1.5 as a position, a cell
without slots) leave that column to pyarrow's inference, so the conforming step judges them as before.
benchmarks/api_frames.py measures it against paths."""
from __future__ import annotations

from ..errors import UsageError


def from_pandas(frame, contract, flag: str):
    """The contract's columns of a pandas frame as a pyarrow table (extra columns are not read, so a column of
    Python objects Arrow cannot hold is no error); a contract column Arrow cannot convert is exit 2 naming it."""
    import pyarrow as pa

    names = {f.name for f in contract.struct_type().fields}
    frame = frame[[c for c in frame.columns if c in names]]
    frame.attrs = {}        # a frame from Spark Connect's toPandas() holds plan metrics pyarrow warns it cannot keep
    typed = _typed_from_pandas(frame, contract)
    if typed is not None:
        return typed
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError) as exc:
        from ..safe import clip

        raise UsageError(f"{flag}: the pandas DataFrame cannot be read as the contract's columns "
                         f"(schemas/{contract.name}.schema.json): {clip(str(exc))}") from None


def _typed_from_pandas(frame, contract):
    """The frame as a pyarrow table of the contract's columns: slots through ``_list_of_structs`` (else as pyarrow
    infers that column), contexts as map<string, string>, the flat columns as pandas holds them. None when a column
    converts neither way: the caller then converts the frame whole and names the column Arrow cannot hold."""
    import pyarrow as pa
    from pyspark.sql.types import ArrayType, MapType

    if frame.columns.has_duplicates:
        return None
    arrays = []
    for f in contract.struct_type().fields:
        if f.name not in frame.columns:
            continue
        column = frame[f.name]
        try:
            if isinstance(f.dataType, (ArrayType, MapType)) and column.dtype == object:
                from pyspark.sql.pandas.types import to_arrow_type

                arrow_type = to_arrow_type(f.dataType, timezone="UTC")
                if isinstance(f.dataType, MapType):      # text keys and values: a number is an error, not text
                    arrays.append(pa.array(column, type=arrow_type, from_pandas=True))
                else:
                    arrays.append(_list_of_structs(column, arrow_type) or pa.array(column, from_pandas=True))
            else:
                arrays.append(pa.Array.from_pandas(column))
        except Exception:  # noqa: BLE001 - pyarrow's conversion errors (ArrowInvalid/TypeError/...): not as typed
            return None
    return pa.Table.from_arrays(arrays, names=[f.name for f in contract.struct_type().fields
                                               if f.name in frame.columns])


def _list_of_structs(column, arrow_type):
    """A column of lists of dicts (slots) as a list<struct> array, one field at a time: the cells' dicts in one
    array, each field's values taken out of them in one pass and converted as pandas values (NaN is null, as
    pa.array(..., from_pandas=True) makes them). Two thirds of converting the cells whole (the walkthrough's
    decisions: 1.0 s against 1.6 s). None where the cells are not all lists of dicts with every field (a null cell,
    a missing key, a tuple): the caller converts the column whole."""
    import operator

    import numpy as np
    import pyarrow as pa
    import pyarrow.types as T

    if not (T.is_list(arrow_type) and T.is_struct(arrow_type.value_type)):
        return None
    try:
        values = column.to_numpy(dtype=object)
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        flat = np.concatenate(values) if len(values) else np.empty(0, dtype=object)
        if flat.ndim != 1 or int(lengths.sum()) >= 2 ** 31:
            return None
        st = arrow_type.value_type
        fields = [pa.field(st.field(i).name, st.field(i).type) for i in range(st.num_fields)]
        children = [_child(list(map(operator.itemgetter(f.name), flat)), f.type) for f in fields]
    except (TypeError, KeyError, ValueError, IndexError, pa.ArrowException):
        return None
    if any(c is None for c in children):
        return None
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.StructArray.from_arrays(children, fields=fields))


def _child(values: list, arrow_type):
    """A field's values as ``arrow_type`` when they are of its kind (an integer field: integers, cast without
    loss; text: text), else None: a value of another kind (1.5 as a position) is left to the conforming step,
    as an inferred column is."""
    import pyarrow as pa
    import pyarrow.types as T

    if T.is_integer(arrow_type):
        inferred = pa.array(values, from_pandas=True)
        if not (T.is_integer(inferred.type) or T.is_null(inferred.type)):
            return None
        return inferred.cast(arrow_type)           # safe: an overflow raises, and the column is read as inferred
    return pa.array(values, type=arrow_type, from_pandas=True)
