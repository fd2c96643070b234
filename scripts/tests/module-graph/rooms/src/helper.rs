pub fn helper() -> u32 {
    crate::value() + 1
}
