use crate::codes::KDL_CPU;
use crate::dtype::DataType;

pub struct View {
    pub device: u32,
    pub dtype: DataType,
}

pub fn cpu(dtype: DataType) -> View {
    View { device: KDL_CPU, dtype }
}
