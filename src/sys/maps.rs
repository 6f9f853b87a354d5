//! `/proc/self/maps`: which mappings this process has, to check that a pointer a private
//! layout gave is the start of the kernel mapping it should be before anything reads it.

/// One line of `/proc/self/maps`: the address range and the file mapped (if any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) path: String,
}

/// Parses the text of `/proc/self/maps`; lines that do not parse are skipped.
pub(crate) fn parse(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (start, end) = f.next()?.split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?;
            let path = f.nth(4).unwrap_or("").to_string();
            Some(Mapping { start, end, path })
        })
        .collect()
}

/// Whether `[addr, addr + len)` lies inside one mapping of a file whose path contains
/// `file` (`/dev/infiniband/uverbs` for a queue the RDMA driver mapped). The kernel may
/// merge adjacent mappings of the same file, so inclusion, not equality, is the test.
pub(crate) fn covered_by_file(maps: &[Mapping], addr: u64, len: u64, file: &str) -> Result<(), String> {
    let Some(end) = addr.checked_add(len) else {
        return Err(format!("{addr:#x} + {len} bytes wraps the address space"));
    };
    match maps.iter().find(|m| m.start <= addr && addr < m.end) {
        None => Err(format!("nothing is mapped at {addr:#x}")),
        Some(m) if !m.path.contains(file) => Err(format!("{addr:#x} is in a mapping of {:?}, not of {file}", m.path)),
        Some(m) if end > m.end => Err(format!("{addr:#x} + {len} bytes runs past the mapping's end at {:#x}", m.end)),
        Some(_) => Ok(()),
    }
}

/// This process's mappings.
pub(crate) fn current() -> Result<Vec<Mapping>, String> {
    std::fs::read_to_string("/proc/self/maps")
        .map(|t| parse(&t))
        .map_err(|e| format!("cannot read /proc/self/maps: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0000000-55d0c0021000 r--p 00000000 00:1f 1234  /usr/bin/dvcq
7ffb8d972000-7ffb8d974000 rw-s 0014f000 00:05 99   /dev/infiniband/uverbs0
7ffb8d974000-7ffb8d976000 rw-p 00000000 00:00 0
garbage line
";

    #[test]
    fn a_queue_inside_a_uverbs_mapping_passes() {
        let maps = parse(MAPS);
        assert_eq!(maps.len(), 3);
        assert_eq!(maps[1].path, "/dev/infiniband/uverbs0");
        assert_eq!(covered_by_file(&maps, 0x7ffb_8d97_2000, 0x2000, "/dev/infiniband/uverbs"), Ok(()));
    }

    #[test]
    fn anything_else_is_refused_with_what_was_found() {
        let maps = parse(MAPS);
        let uverbs = "/dev/infiniband/uverbs";
        let e = covered_by_file(&maps, 0x7ffb_8d97_2000, 0x2001, uverbs).unwrap_err();
        assert!(e.contains("runs past"), "{e}");
        let e = covered_by_file(&maps, 0x7ffb_8d97_4000, 0x1000, uverbs).unwrap_err();
        assert!(e.contains("not of /dev/infiniband/uverbs"), "{e}");
        let e = covered_by_file(&maps, 0x1000, 0x1000, uverbs).unwrap_err();
        assert!(e.contains("nothing is mapped"), "{e}");
        let e = covered_by_file(&maps, u64::MAX - 4, 0x1000, uverbs).unwrap_err();
        assert!(e.contains("wraps"), "{e}");
    }
}
