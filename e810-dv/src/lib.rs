//! dvcq irdma backend (in progress).
