//! Request sources: trace readers and synthetic generators. (Filled in by issue 2.)
