mod check;

pub use check::valid;

pub struct DataType(pub u32);
