// Re-exports llguidance's C API (its `extern "C"` functions, declared in the crate's
// llguidance.h) so that they end up in this static library.
pub use llguidance::ffi::*;
