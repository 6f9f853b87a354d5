//! dvcq
