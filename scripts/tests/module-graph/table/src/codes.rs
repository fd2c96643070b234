pub const KDL_CPU: u32 = 1;
