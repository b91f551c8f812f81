//! (Filled in by the issue that owns it.)
