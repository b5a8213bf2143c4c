//! The record format of pack segments, and reading records back from a segment.
//!
//! A record, little-endian:
//!
//! ```text
//! magic     4 bytes  "NPK1"
//! crc       u32      CRC-32 (IEEE) of every byte after this field, body included
//! kind      u8       1 = put, 2 = delete
//! key_len   u16      1..=1024 (a key's longest, [`MAX_KEY_LEN`])
//! type_len  u16      length of the content type (0 = none)
//! body_len  u64
//! modified  i64      Unix time of the put, in nanoseconds
//! key, content type, body
//! ```
//!
//! The checksum covers the whole record, so a torn write (a crash in the middle of an append)
//! or damaged bytes make a record invalid rather than wrong. [`scan`] skips invalid bytes and
//! resynchronises on the next valid record.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::object::key::MAX_KEY_LEN;

/// The first bytes of every record.
pub(super) const MAGIC: [u8; 4] = *b"NPK1";
/// Bytes before the key.
pub(super) const HEADER_LEN: usize = 29;
/// How far [`scan`] reads at a time while looking for the next record after invalid bytes.
const RESYNC_CHUNK: usize = 64 * 1024;

/// What a record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Put,
    Delete,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Put => 1,
            Kind::Delete => 2,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Kind::Put),
            2 => Some(Kind::Delete),
            _ => None,
        }
    }
}

/// One record to append.
#[derive(Debug)]
pub(super) struct Encoded {
    pub bytes: Vec<u8>,
    /// Where the body starts within `bytes`.
    pub body_start: usize,
}

impl Encoded {
    /// Length of the body the record carries.
    pub fn body_len(&self) -> u64 {
        (self.bytes.len() - self.body_start) as u64
    }
}

/// Encode a record. The key and content type lengths must already be checked against
/// [`u16::MAX`] (keys are at most 1024 bytes; see [`super::PackObjectStore::put`]).
pub(super) fn encode(
    kind: Kind,
    key: &str,
    content_type: &str,
    body: &[u8],
    modified_nanos: i64,
) -> Encoded {
    let key_len = u16::try_from(key.len()).unwrap_or(u16::MAX);
    let type_len = u16::try_from(content_type.len()).unwrap_or(u16::MAX);
    let body_start = HEADER_LEN + key.len() + content_type.len();
    let mut bytes = Vec::with_capacity(body_start + body.len());
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&[0; 4]); // the checksum, filled in below
    bytes.push(kind.byte());
    bytes.extend_from_slice(&key_len.to_le_bytes());
    bytes.extend_from_slice(&type_len.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&modified_nanos.to_le_bytes());
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(content_type.as_bytes());
    bytes.extend_from_slice(body);
    let crc = crc32fast::hash(&bytes[8..]);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    Encoded { bytes, body_start }
}

/// A valid record found by [`scan`]; the body stays in the segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Scanned {
    pub kind: Kind,
    /// Offset of the record in the segment.
    pub offset: u64,
    /// Length of the whole record.
    pub len: u64,
    pub key: String,
    pub content_type: String,
    /// Offset of the body in the segment.
    pub body_offset: u64,
    pub body_len: u64,
    pub modified_nanos: i64,
}

/// What [`scan`] found in a segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ScanSummary {
    pub records: u64,
    /// Bytes that were not part of any valid record.
    pub invalid_bytes: u64,
    /// Where the last valid record ends (where the scan started if there is none).
    pub valid_end: u64,
}

struct Header {
    crc: u32,
    kind: Kind,
    key_len: usize,
    type_len: usize,
    body_len: u64,
    modified_nanos: i64,
}

fn parse_header(b: &[u8; HEADER_LEN]) -> Option<Header> {
    if b[0..4] != MAGIC {
        return None;
    }
    let u16_at = |i: usize| usize::from(u16::from_le_bytes([b[i], b[i + 1]]));
    let mut u64_bytes = [0u8; 8];
    u64_bytes.copy_from_slice(&b[13..21]);
    let body_len = u64::from_le_bytes(u64_bytes);
    u64_bytes.copy_from_slice(&b[21..29]);
    let modified_nanos = i64::from_le_bytes(u64_bytes);
    let header = Header {
        crc: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        kind: Kind::from_byte(b[8])?,
        key_len: u16_at(9),
        type_len: u16_at(11),
        body_len,
        modified_nanos,
    };
    let well_formed = (1..=MAX_KEY_LEN).contains(&header.key_len)
        && (header.kind == Kind::Put || (header.type_len == 0 && header.body_len == 0));
    well_formed.then_some(header)
}

/// The valid record at `offset` of a segment `len` bytes long, or `None`. On `Some`, `buf`
/// holds the whole record (header, key, content type and body); it is scratch space, reused
/// between calls.
fn record_at(file: &File, offset: u64, len: u64, buf: &mut Vec<u8>) -> io::Result<Option<Scanned>> {
    let mut header_bytes = [0u8; HEADER_LEN];
    if len.saturating_sub(offset) < HEADER_LEN as u64 {
        return Ok(None);
    }
    file.read_exact_at(&mut header_bytes, offset)?;
    let Some(header) = parse_header(&header_bytes) else {
        return Ok(None);
    };
    // A damaged length may be anything: a sum past u64 is no record, not an overflow.
    let Some(record_len) =
        ((HEADER_LEN + header.key_len + header.type_len) as u64).checked_add(header.body_len)
    else {
        return Ok(None);
    };
    if len - offset < record_len {
        return Ok(None); // runs past the end: a torn append
    }
    let Ok(whole) = usize::try_from(record_len) else {
        return Ok(None);
    };
    buf.clear();
    buf.resize(whole, 0);
    buf[..HEADER_LEN].copy_from_slice(&header_bytes);
    file.read_exact_at(&mut buf[HEADER_LEN..], offset + HEADER_LEN as u64)?;
    if crc32fast::hash(&buf[8..]) != header.crc {
        return Ok(None);
    }
    let key_end = HEADER_LEN + header.key_len;
    let (Ok(key), Ok(content_type)) = (
        std::str::from_utf8(&buf[HEADER_LEN..key_end]),
        std::str::from_utf8(&buf[key_end..key_end + header.type_len]),
    ) else {
        return Ok(None);
    };
    Ok(Some(Scanned {
        kind: header.kind,
        offset,
        len: record_len,
        key: key.to_owned(),
        content_type: content_type.to_owned(),
        body_offset: offset + (key_end + header.type_len) as u64,
        body_len: header.body_len,
        modified_nanos: header.modified_nanos,
    }))
}

/// The offset of the next [`MAGIC`] at or after `from`, if any.
fn next_magic(file: &File, from: u64, len: u64) -> io::Result<Option<u64>> {
    let mut chunk = vec![0u8; RESYNC_CHUNK];
    let mut start = from;
    while start < len {
        let n = usize::try_from((len - start).min(RESYNC_CHUNK as u64)).unwrap_or(RESYNC_CHUNK);
        file.read_exact_at(&mut chunk[..n], start)?;
        if let Some(i) = chunk[..n].windows(MAGIC.len()).position(|w| w == MAGIC) {
            return Ok(Some(start + i as u64));
        }
        if n < MAGIC.len() {
            break;
        }
        // Overlap by three bytes, so a magic split between chunks is found.
        start += (n - (MAGIC.len() - 1)) as u64;
    }
    Ok(None)
}

/// Read every valid record of a segment `len` bytes long, in order. Invalid bytes (a torn
/// append at the end, or damage anywhere) are skipped: reading resumes at the next valid
/// record after them.
#[cfg(test)]
pub(super) fn scan(
    file: &File,
    len: u64,
    mut visit: impl FnMut(Scanned),
) -> io::Result<ScanSummary> {
    scan_from(file, 0, len, |record, _| {
        visit(record);
        Ok(())
    })
}

/// [`scan`] from `start` (a record boundary), handing each record to `visit` with its bytes
/// (header, key, content type and body: the record exactly as stored). An error from
/// `visit` stops the scan.
pub(super) fn scan_from(
    file: &File,
    start: u64,
    len: u64,
    mut visit: impl FnMut(Scanned, &[u8]) -> io::Result<()>,
) -> io::Result<ScanSummary> {
    let mut summary = ScanSummary {
        valid_end: start,
        ..ScanSummary::default()
    };
    let mut buf = Vec::new();
    let mut offset = start;
    while offset < len {
        if let Some(record) = record_at(file, offset, len, &mut buf)? {
            offset += record.len;
            visit(record, &buf)?;
            summary.records += 1;
            summary.valid_end = offset;
            continue;
        }
        let next = next_magic(file, offset + 1, len)?.unwrap_or(len);
        summary.invalid_bytes += next - offset;
        offset = next;
    }
    Ok(summary)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use std::io::Write;

    use proptest::prelude::Strategy as _;

    use super::*;

    fn segment(bytes: &[u8]) -> (tempfile::NamedTempFile, u64) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(bytes).unwrap();
        (file, bytes.len() as u64)
    }

    fn scan_all(bytes: &[u8]) -> (Vec<Scanned>, ScanSummary) {
        let (file, len) = segment(bytes);
        let mut found = Vec::new();
        let summary = scan(file.as_file(), len, |r| found.push(r)).unwrap();
        (found, summary)
    }

    fn put(key: &str, body: &[u8]) -> Vec<u8> {
        encode(Kind::Put, key, "text/plain", body, 7).bytes
    }

    #[test]
    fn records_round_trip_with_their_body_offsets() {
        let mut bytes = put("a/one", b"first");
        let second = encode(Kind::Delete, "a/one", "", b"", 9);
        bytes.extend_from_slice(&second.bytes);
        let (found, summary) = scan_all(&bytes);
        assert_eq!(summary.records, 2);
        assert_eq!(summary.invalid_bytes, 0);
        assert_eq!(summary.valid_end, bytes.len() as u64);
        assert_eq!(found[0].kind, Kind::Put);
        assert_eq!(found[0].key, "a/one");
        assert_eq!(found[0].content_type, "text/plain");
        assert_eq!(found[0].modified_nanos, 7);
        let start = found[0].body_offset as usize;
        assert_eq!(&bytes[start..start + found[0].body_len as usize], b"first");
        assert_eq!(found[1].kind, Kind::Delete);
        assert_eq!(found[1].body_len, 0);
    }

    #[test]
    fn a_torn_tail_is_skipped() {
        let mut bytes = put("k1", b"kept");
        let whole = bytes.len() as u64;
        let torn = put("k2", b"torn by a crash");
        bytes.extend_from_slice(&torn[..torn.len() - 3]);
        let (found, summary) = scan_all(&bytes);
        assert_eq!(found.len(), 1);
        assert_eq!(summary.valid_end, whole);
        assert_eq!(summary.invalid_bytes, bytes.len() as u64 - whole);
    }

    #[test]
    fn damage_in_the_middle_costs_only_the_damaged_record() {
        let first = put("k1", b"one");
        let second = put("k2", b"two");
        let third = put("k3", b"three");
        let mut bytes = [first.clone(), second.clone(), third].concat();
        // Flip a body byte of the second record: its checksum no longer matches.
        let flip = first.len() + second.len() - 1;
        bytes[flip] ^= 0xff;
        let (found, summary) = scan_all(&bytes);
        let keys: Vec<_> = found.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["k1", "k3"]);
        assert_eq!(summary.invalid_bytes, second.len() as u64);
    }

    #[test]
    fn garbage_between_records_and_a_magic_inside_a_body_are_survived() {
        // A body that contains the magic itself, then junk, then a good record.
        let mut body = b"xx".to_vec();
        body.extend_from_slice(&MAGIC);
        body.extend_from_slice(b"yy");
        let first = put("k1", &body);
        let mut bytes = first.clone();
        bytes.extend_from_slice(b"junk-NPK-junk");
        bytes.extend_from_slice(&put("k2", b"after"));
        let (found, _) = scan_all(&bytes);
        let keys: Vec<_> = found.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["k1", "k2"]);
    }

    #[test]
    fn an_empty_segment_has_nothing() {
        let (found, summary) = scan_all(b"");
        assert!(found.is_empty());
        assert_eq!(summary, ScanSummary::default());
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        /// Damage anywhere (garbage, or headers with any lengths after a valid magic) is
        /// skipped without a panic; every byte is either a valid record or counted invalid.
        #[test]
        fn any_segment_is_scanned_without_a_panic(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
                    (
                        proptest::prelude::any::<[u8; HEADER_LEN - 4]>(),
                        proptest::prelude::any::<u8>(),
                        1..=MAX_KEY_LEN as u16,
                        proptest::prop_oneof![
                            proptest::prelude::any::<u64>(),
                            0u64..64,
                            u64::MAX - 70_000..=u64::MAX,
                        ],
                    )
                        .prop_map(|(rest, kind, key_len, body_len)| {
                            let mut h = MAGIC.to_vec();
                            h.extend_from_slice(&rest);
                            h[8] = kind % 3;
                            h[9..11].copy_from_slice(&key_len.to_le_bytes());
                            h[13..21].copy_from_slice(&body_len.to_le_bytes());
                            h
                        }),
                    "[a-z/]{1,12}".prop_map(|key| put(&key, key.as_bytes())),
                ],
                0..8,
            ),
        ) {
            let bytes = pieces.concat();
            let (found, summary) = scan_all(&bytes);
            let valid: u64 = found.iter().map(|r| r.len).sum();
            proptest::prop_assert_eq!(valid + summary.invalid_bytes, bytes.len() as u64);
            proptest::prop_assert_eq!(summary.records, found.len() as u64);
        }
    }
}
