//! image (todo)
