//! Adapters to the crates Rust users hold their tensors in, each behind its own cargo feature
//! (all off by default). The table on the [crate's front page](crate#adapters) says what each
//! one produces and consumes and whether data moves.

#[cfg(feature = "ndarray")]
mod absolute;
#[cfg(feature = "burn")]
#[cfg_attr(docsrs, doc(cfg(feature = "burn")))]
pub mod burn;
#[cfg(feature = "candle")]
#[cfg_attr(docsrs, doc(cfg(feature = "candle")))]
pub mod candle;
#[cfg(feature = "image")]
#[cfg_attr(docsrs, doc(cfg(feature = "image")))]
pub mod image;
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub mod ndarray;
