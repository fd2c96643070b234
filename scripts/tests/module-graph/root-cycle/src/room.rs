pub fn value() -> u32 {
    1
}

pub fn twice() -> u32 {
    crate::helper() * 2
}
