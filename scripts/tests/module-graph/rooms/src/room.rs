pub fn value() -> u32 {
    1
}

pub fn twice() -> u32 {
    value() * 2
}
