use super::DataType;

pub fn valid(dtype: &DataType) -> bool {
    dtype.0 > 0
}
