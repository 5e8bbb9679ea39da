//! Which MPI ABI a process runs and which one `libwmhcct_mpi.so` was built
//! for, so that the tracer never loads an MPI-side library of the other
//! family into a job: its calls would pass one family's handles to the
//! other's functions, and the MPI library aborts the job.
//!
//! Two families share nothing at the binary level: Open MPI's handles are
//! pointers, the MPICH family's (MPICH, Intel MPI, MVAPICH, Cray MPICH)
//! are ints. The side library says which it was built for in an ELF
//! section of its own ([`SECTION`], holding [`marker`]), which the tracer
//! reads from the file *before* loading it ([`read_library`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The two binary families of MPI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpiAbi {
    /// Open MPI (and its derivatives): handles are pointers.
    OpenMpi,
    /// MPICH, Intel MPI, MVAPICH, Cray MPICH: handles are ints.
    Mpich,
}

impl MpiAbi {
    /// The family of an MPI whose handles (`MPI_Comm`) are `handle_bytes`
    /// wide, on a platform with `pointer_bytes`-wide pointers.
    pub const fn from_handle_size(handle_bytes: usize, pointer_bytes: usize) -> MpiAbi {
        if handle_bytes == pointer_bytes && handle_bytes != 4 {
            MpiAbi::OpenMpi
        } else {
            MpiAbi::Mpich
        }
    }

    /// Code returned by the side library's `wmhcct_mpi_abi()`.
    pub const fn code(self) -> i32 {
        match self {
            MpiAbi::OpenMpi => 1,
            MpiAbi::Mpich => 2,
        }
    }

    pub fn from_code(code: i32) -> Option<MpiAbi> {
        [MpiAbi::OpenMpi, MpiAbi::Mpich]
            .into_iter()
            .find(|a| a.code() == code)
    }

    /// The tag in the side library's file name, `libwmhcct_mpi_<tag>.so`,
    /// and in its marker.
    pub const fn tag(self) -> &'static str {
        match self {
            MpiAbi::OpenMpi => "openmpi",
            MpiAbi::Mpich => "mpich",
        }
    }

    /// For messages.
    pub const fn describe(self) -> &'static str {
        match self {
            MpiAbi::OpenMpi => "Open MPI",
            MpiAbi::Mpich => "the MPICH family",
        }
    }

    /// The family named by an MPI library's version string
    /// (`MPI_Get_library_version`), if it is one of the MPICH family's;
    /// Open MPI is recognised by its symbols instead.
    pub fn from_library_version(version: &str) -> Option<MpiAbi> {
        const MPICH: [&str; 4] = ["MPICH", "Intel(R) MPI", "MVAPICH", "CRAY MPICH"];
        if version.starts_with("Open MPI") {
            return Some(MpiAbi::OpenMpi);
        }
        MPICH
            .iter()
            .any(|m| version.contains(m))
            .then_some(MpiAbi::Mpich)
    }
}

/// Name of the side library's ELF section that holds its [`marker`].
pub const SECTION: &str = ".wmhcct_mpi_abi";
/// Bytes of a marker.
pub const MARKER_LEN: usize = 32;
const PREFIX: &[u8] = b"wmhcct-mpi-abi:";

/// The section's content for a library built for `abi`: the prefix, the
/// tag, zero bytes up to [`MARKER_LEN`].
pub const fn marker(abi: MpiAbi) -> [u8; MARKER_LEN] {
    let mut out = [0u8; MARKER_LEN];
    let tag = abi.tag().as_bytes();
    let mut i = 0;
    while i < PREFIX.len() {
        out[i] = PREFIX[i];
        i += 1;
    }
    let mut j = 0;
    while j < tag.len() {
        out[i + j] = tag[j];
        j += 1;
    }
    out
}

/// The family a marker names.
pub fn parse_marker(bytes: &[u8]) -> Option<MpiAbi> {
    let rest = bytes.strip_prefix(PREFIX)?;
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let tag = &rest[..end];
    [MpiAbi::OpenMpi, MpiAbi::Mpich]
        .into_iter()
        .find(|a| a.tag().as_bytes() == tag)
}

/// The family the side library at `path` was built for, read from its
/// [`SECTION`] without loading it. `None`: not a 64-bit little-endian ELF
/// file, no such section, or an unknown marker.
pub fn read_library(path: &Path) -> Option<MpiAbi> {
    let mut f = std::fs::File::open(path).ok()?;
    read_elf_marker(&mut f)
}

/// Largest section header table read (sections × 64 bytes).
const MAX_SECTIONS: u64 = 4096;

fn read_elf_marker<R: Read + Seek>(f: &mut R) -> Option<MpiAbi> {
    let mut eh = [0u8; 64];
    f.read_exact(&mut eh).ok()?;
    // ELF magic, 64-bit class, little-endian data.
    if eh[..4] != *b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let shoff = u64_at(&eh, 0x28);
    let shentsize = u64::from(u16_at(&eh, 0x3a));
    let shnum = u64::from(u16_at(&eh, 0x3c));
    let shstrndx = u64::from(u16_at(&eh, 0x3e));
    if shentsize != 64 || shnum == 0 || shnum > MAX_SECTIONS || shstrndx >= shnum {
        return None;
    }
    let mut table = vec![0u8; (shnum * 64) as usize];
    f.seek(SeekFrom::Start(shoff)).ok()?;
    f.read_exact(&mut table).ok()?;
    let header = |i: u64| &table[(i * 64) as usize..(i * 64 + 64) as usize];
    // (offset, size) of a section.
    let extent = |h: &[u8]| (u64_at(h, 0x18), u64_at(h, 0x20));
    let (str_off, str_size) = extent(header(shstrndx));
    if str_size > 1 << 20 {
        return None;
    }
    let mut names = vec![0u8; str_size as usize];
    f.seek(SeekFrom::Start(str_off)).ok()?;
    f.read_exact(&mut names).ok()?;
    let want = SECTION.as_bytes();
    let found = (0..shnum).map(header).find(|h| {
        let at = u32_at(h, 0) as usize;
        names
            .get(at..)
            .and_then(|n| n.strip_prefix(want))
            .is_some_and(|rest| rest.first() == Some(&0))
    })?;
    let (off, size) = extent(found);
    if size < PREFIX.len() as u64 || size > MARKER_LEN as u64 {
        return None;
    }
    let mut content = vec![0u8; size as usize];
    f.seek(SeekFrom::Start(off)).ok()?;
    f.read_exact(&mut content).ok()?;
    parse_marker(&content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn markers_round_trip() {
        for abi in [MpiAbi::OpenMpi, MpiAbi::Mpich] {
            assert_eq!(parse_marker(&marker(abi)), Some(abi));
            assert_eq!(MpiAbi::from_code(abi.code()), Some(abi));
        }
        assert_eq!(parse_marker(b"wmhcct-mpi-abi:lam\0"), None);
        assert_eq!(parse_marker(b"something else"), None);
        assert_eq!(MpiAbi::from_code(0), None);
    }

    #[test]
    fn handle_sizes() {
        assert_eq!(MpiAbi::from_handle_size(8, 8), MpiAbi::OpenMpi);
        assert_eq!(MpiAbi::from_handle_size(4, 8), MpiAbi::Mpich);
        assert_eq!(MpiAbi::from_handle_size(4, 4), MpiAbi::Mpich);
    }

    #[test]
    fn library_versions() {
        let cases = [
            (
                "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4",
                Some(MpiAbi::OpenMpi),
            ),
            (
                "MPICH Version:\t4.0.2\nMPICH Release date: ...",
                Some(MpiAbi::Mpich),
            ),
            (
                "Intel(R) MPI Library 2021.10 for Linux* OS",
                Some(MpiAbi::Mpich),
            ),
            ("MVAPICH2 Version      :\t2.3.7", Some(MpiAbi::Mpich)),
            ("CRAY MPICH version 8.1.25", Some(MpiAbi::Mpich)),
            ("HPE MPT 2.26", None),
            ("", None),
        ];
        for (v, want) in cases {
            assert_eq!(MpiAbi::from_library_version(v), want, "{v}");
        }
    }

    /// A minimal ELF file: header, the marker, a section-name table and
    /// three section headers (null, the marker's, the names').
    fn elf(section: &str, content: &[u8]) -> Vec<u8> {
        let mut names = vec![0u8];
        let name_at = names.len() as u32;
        names.extend_from_slice(section.as_bytes());
        names.push(0);
        let shstr_name = names.len() as u32;
        names.extend_from_slice(b".shstrtab\0");
        let content_off = 64u64;
        let names_off = content_off + content.len() as u64;
        let shoff = names_off + names.len() as u64;
        let mut f = vec![0u8; 64];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        f[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        f[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        f[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        f.extend_from_slice(content);
        f.extend_from_slice(&names);
        let sh = |name: u32, off: u64, size: u64| {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&off.to_le_bytes());
            h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            h
        };
        f.extend(sh(0, 0, 0));
        f.extend(sh(name_at, content_off, content.len() as u64));
        f.extend(sh(shstr_name, names_off, names.len() as u64));
        f
    }

    #[test]
    fn reads_the_marker_section() {
        for abi in [MpiAbi::OpenMpi, MpiAbi::Mpich] {
            let file = elf(SECTION, &marker(abi));
            assert_eq!(read_elf_marker(&mut Cursor::new(file)), Some(abi));
        }
    }

    #[test]
    fn no_marker_no_answer() {
        // Another section of the same prefix, a foreign marker, a file cut
        // short, not ELF at all.
        let other = elf(".wmhcct_mpi_abi2", &marker(MpiAbi::Mpich));
        assert_eq!(read_elf_marker(&mut Cursor::new(other)), None);
        let foreign = elf(SECTION, b"wmhcct-mpi-abi:lam\0");
        assert_eq!(read_elf_marker(&mut Cursor::new(foreign)), None);
        let mut cut = elf(SECTION, &marker(MpiAbi::Mpich));
        cut.truncate(cut.len() - 10);
        assert_eq!(read_elf_marker(&mut Cursor::new(cut)), None);
        assert_eq!(
            read_elf_marker(&mut Cursor::new(b"#!/bin/sh\n".to_vec())),
            None
        );
        assert_eq!(
            read_library(Path::new("/nonexistent/libwmhcct_mpi.so")),
            None
        );
    }
}
