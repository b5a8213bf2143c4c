//! CIDv1 (raw codec, sha2-256) and the MoltNet diary-entry CID.
//!
//! MoltNet identifies entries by `bafkrei…` CIDs computed from a fixed JSON text of the
//! entry (compat/moltnet.md §3). Signatures are made over that CID string, so it has to be
//! reproduced byte-for-byte: every step below mirrors the TypeScript original.

use sha2::{Digest, Sha256};

use crate::jcs;

/// Version string embedded in every entry's canonical text.
const ENTRY_VERSION: &str = "moltnet:diary:v1";

/// `0x01` CID version 1, `0x55` multicodec `raw`, `0x12` multihash sha2-256, `0x20` digest
/// length 32. All four values are below 0x80, so each varint is a single byte.
const CID_V1_RAW_SHA256_PREFIX: [u8; 4] = [0x01, 0x55, 0x12, 0x20];
const CID_BYTES_LEN: usize = CID_V1_RAW_SHA256_PREFIX.len() + 32;

/// Multibase prefix for lowercase RFC 4648 base32 without padding.
const MULTIBASE_BASE32_LOWER: char = 'b';

/// Why a text is not a CIDv1 raw/sha2-256 in multibase base32.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidError {
    #[error("CID must start with multibase prefix 'b' (lowercase base32), e.g. \"bafkrei…\"")]
    Multibase,
    #[error(
        "CID contains {found:?}; after the 'b' prefix only lowercase base32 (a-z, 2-7, no padding) is allowed"
    )]
    InvalidCharacter { found: char },
    #[error("CID is not valid base32: {0}")]
    Base32(String),
    #[error(
        "CID decodes to {actual} bytes; a CIDv1 raw sha2-256 is exactly 36 bytes (59 characters)"
    )]
    Length { actual: usize },
    #[error("CID version byte is 0x{0:02x}; only CIDv1 (0x01) is supported")]
    Version(u8),
    #[error("CID codec is 0x{0:02x}; only the raw codec (0x55) is supported")]
    Codec(u8),
    #[error(
        "CID multihash is 0x{code:02x} with length {len}; only sha2-256 (0x12) with a 32-byte digest is supported"
    )]
    Multihash { code: u8, len: u8 },
}

/// CIDv1 (raw codec, sha2-256 multihash) of `bytes`, multibase base32 lowercase.
pub fn cid_v1_raw_sha256(bytes: &[u8]) -> String {
    cid_from_digest(&Sha256::digest(bytes).into())
}

/// The CID text for an already computed SHA-256 digest.
pub fn cid_from_digest(digest: &[u8; 32]) -> String {
    let mut raw = Vec::with_capacity(CID_BYTES_LEN);
    raw.extend_from_slice(&CID_V1_RAW_SHA256_PREFIX);
    raw.extend_from_slice(digest);
    // data-encoding's RFC 4648 base32 alphabet is uppercase; the multibase 'b' form is
    // the same alphabet lowercased.
    let mut out = String::with_capacity(1 + 58);
    out.push(MULTIBASE_BASE32_LOWER);
    out.push_str(
        &data_encoding::BASE32_NOPAD
            .encode(&raw)
            .to_ascii_lowercase(),
    );
    out
}

/// Validates a CIDv1 raw/sha2-256 in multibase base32 lowercase and returns its digest.
pub fn parse_cid(s: &str) -> Result<[u8; 32], CidError> {
    let body = s
        .strip_prefix(MULTIBASE_BASE32_LOWER)
        .ok_or(CidError::Multibase)?;
    // Uppercase is a different multibase ('B'), so it is rejected, not folded: one digest
    // must have exactly one CID text.
    if let Some(found) = body.chars().find(|c| !matches!(c, 'a'..='z' | '2'..='7')) {
        return Err(CidError::InvalidCharacter { found });
    }
    // BASE32_NOPAD also rejects non-zero trailing bits, so the text is canonical.
    let raw = data_encoding::BASE32_NOPAD
        .decode(body.to_ascii_uppercase().as_bytes())
        .map_err(|e| CidError::Base32(e.to_string()))?;
    if raw.len() != CID_BYTES_LEN {
        return Err(CidError::Length { actual: raw.len() });
    }
    match raw[..4] {
        [0x01, 0x55, 0x12, 0x20] => {}
        [0x01, 0x55, code, len] => return Err(CidError::Multihash { code, len }),
        [0x01, codec, _, _] => return Err(CidError::Codec(codec)),
        [version, ..] => return Err(CidError::Version(version)),
        _ => return Err(CidError::Length { actual: raw.len() }),
    }
    let mut digest = [0u8; 32];
    digest.copy_from_slice(&raw[4..]);
    Ok(digest)
}

/// The exact text MoltNet hashes for an entry:
/// `{"c":…,"t":…,"tags":[…],"type":…,"v":"moltnet:diary:v1"}`.
///
/// `title: None` is the empty string and `tags: None` the empty list (so they hash the
/// same); tags are sorted by UTF-16 code units (JavaScript's default `Array.prototype.sort`)
/// with duplicates kept; nothing is trimmed or normalized. The key order is fixed and
/// happens to be sorted, so this text is also the RFC 8785 form of the object.
pub fn entry_canonical_text(
    entry_type: &str,
    title: Option<&str>,
    content: &str,
    tags: Option<&[String]>,
) -> String {
    let mut sorted: Vec<&str> = tags
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect();
    // Rust's `str` ordering is by UTF-8 bytes (= code points), which differs from UTF-16
    // order for characters above U+FFFF versus U+E000..U+FFFF.
    sorted.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));

    let mut out = String::with_capacity(content.len() + 64);
    out.push_str("{\"c\":");
    jcs::write_string(&mut out, content);
    out.push_str(",\"t\":");
    jcs::write_string(&mut out, title.unwrap_or_default());
    out.push_str(",\"tags\":[");
    for (i, tag) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        jcs::write_string(&mut out, tag);
    }
    out.push_str("],\"type\":");
    jcs::write_string(&mut out, entry_type);
    out.push_str(",\"v\":");
    jcs::write_string(&mut out, ENTRY_VERSION);
    out.push('}');
    out
}

/// MoltNet entry CID (`contentHash`): CIDv1 raw sha2-256 of [`entry_canonical_text`].
/// Callers apply MoltNet's `entry_type` default (`semantic`) before calling.
pub fn entry_cid(
    entry_type: &str,
    title: Option<&str>,
    content: &str,
    tags: Option<&[String]>,
) -> String {
    cid_v1_raw_sha256(entry_canonical_text(entry_type, title, content, tags).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn moltnet_vectors() {
        let t = tags(&["tag1"]);
        assert_eq!(
            entry_cid("semantic", Some("Title"), "Content", Some(&t)),
            "bafkreidxfykbrvutwidnpsnto4ij6kpe6r3oofqthfc5ohvcmrpsw3irse"
        );
        assert_eq!(
            entry_cid("semantic", Some(""), "Content", Some(&[])),
            "bafkreid5liobpxc3pneqhqzj55uewevi7ekznbyq2zskfhfla5vb62lqhe"
        );
    }

    #[test]
    fn canonical_text_layout() {
        let t = tags(&["b", "a"]);
        assert_eq!(
            entry_canonical_text("semantic", Some("Title"), "Content", Some(&t)),
            r#"{"c":"Content","t":"Title","tags":["a","b"],"type":"semantic","v":"moltnet:diary:v1"}"#
        );
    }

    #[test]
    fn canonical_text_is_the_jcs_form_of_the_object() {
        let t = tags(&["z", "\u{1f600}", "\u{fb33}", "a"]);
        let text = entry_canonical_text("episodic", None, "line\n\"q\"\u{1}", Some(&t));
        let reparsed = jcs::canonicalize_str(&text).unwrap_or_default();
        assert_eq!(text.as_bytes(), reparsed.as_slice());
    }

    #[test]
    fn tag_order_is_irrelevant_duplicates_matter_null_is_empty() {
        let ab = tags(&["alpha", "beta"]);
        let ba = tags(&["beta", "alpha"]);
        let aab = tags(&["alpha", "alpha", "beta"]);
        let cid = |t: Option<&[String]>, title: Option<&str>| entry_cid("semantic", title, "x", t);

        assert_eq!(cid(Some(&ab), None), cid(Some(&ba), None));
        assert_ne!(cid(Some(&ab), None), cid(Some(&aab), None));
        assert_eq!(cid(None, None), cid(Some(&[]), Some("")));
        assert_ne!(cid(None, Some(" ")), cid(None, None));
        // No case folding or trimming.
        assert_ne!(
            cid(Some(&tags(&["A"])), None),
            cid(Some(&tags(&["a"])), None)
        );
        assert_ne!(
            cid(Some(&tags(&["a "])), None),
            cid(Some(&tags(&["a"])), None)
        );
    }

    #[test]
    fn tags_sort_by_utf16_code_units_not_code_points() {
        // U+10000 and U+1F600 are encoded as surrogate pairs (D800.., D83D..), which sort
        // before U+FB33 and U+FFFF in UTF-16 although their code points are larger.
        let t = tags(&[
            "\u{fb33}",
            "\u{1f600}",
            "\u{e9}",
            "Z",
            "a",
            "\u{ffff}",
            "\u{10000}",
        ]);
        let text = entry_canonical_text("semantic", None, "", Some(&t));
        assert_eq!(
            text,
            "{\"c\":\"\",\"t\":\"\",\"tags\":[\"Z\",\"a\",\"\u{e9}\",\"\u{10000}\",\"\u{1f600}\",\"\u{fb33}\",\"\u{ffff}\"],\"type\":\"semantic\",\"v\":\"moltnet:diary:v1\"}"
        );
        // Computed with Node.js (`[...tags].sort()` + JSON.stringify + SHA-256).
        assert_eq!(
            entry_cid("semantic", None, "", Some(&t)),
            "bafkreid6bdbhjtceyq6hsu6xnjdn6ywa6cyfbfg3kfcrxv4yaw4qy2sj3i"
        );
    }

    #[test]
    fn control_and_non_bmp_characters_in_content() {
        let content = "a\u{0}b\u{8}\u{c}\n\r\t\u{1f}\u{7f}\"\\/\u{2028}\u{1f600}é";
        let text = entry_canonical_text("semantic", Some("T"), content, None);
        assert_eq!(
            text,
            "{\"c\":\"a\\u0000b\\b\\f\\n\\r\\t\\u001f\u{7f}\\\"\\\\/\u{2028}\u{1f600}é\",\"t\":\"T\",\"tags\":[],\"type\":\"semantic\",\"v\":\"moltnet:diary:v1\"}"
        );
        let cid = entry_cid("semantic", Some("T"), content, None);
        assert_eq!(cid, cid_v1_raw_sha256(text.as_bytes()));
        // Vector computed with Node.js: the CID of the same entry using
        // JSON.stringify + crypto.createHash("sha256") + multibase base32.
        assert_eq!(cid, NODE_CONTROL_CHARS_CID);
    }

    /// See `control_and_non_bmp_characters_in_content`.
    const NODE_CONTROL_CHARS_CID: &str =
        "bafkreihqwtt7dghjxxg5fuj5ohzm5cfznfa2zbpmd53kkj42jncziawqvu";

    #[test]
    fn cid_shape_and_round_trip() {
        let cid = cid_v1_raw_sha256(b"hello");
        assert_eq!(cid.len(), 59);
        assert!(cid.starts_with("bafkrei"));
        let digest: [u8; 32] = Sha256::digest(b"hello").into();
        assert_eq!(parse_cid(&cid), Ok(digest));
        assert_eq!(cid_from_digest(&digest), cid);
    }

    #[test]
    fn parse_cid_rejects_bad_input() {
        let good = cid_v1_raw_sha256(b"hello");
        assert_eq!(parse_cid(&good[1..]), Err(CidError::Multibase));
        assert_eq!(parse_cid(&good.to_uppercase()), Err(CidError::Multibase));
        assert_eq!(
            parse_cid(&format!("b{}", good[1..].to_uppercase())),
            Err(CidError::InvalidCharacter { found: 'A' })
        );
        assert_eq!(
            parse_cid(&format!("{good}=")),
            Err(CidError::InvalidCharacter { found: '=' })
        );
        assert_eq!(
            parse_cid(&good[..58])
                .err()
                .map(|e| matches!(e, CidError::Base32(_) | CidError::Length { .. })),
            Some(true)
        );
        assert!(matches!(
            parse_cid("b"),
            Err(CidError::Length { actual: 0 })
        ));

        let encode = |raw: &[u8]| {
            format!(
                "b{}",
                data_encoding::BASE32_NOPAD.encode(raw).to_ascii_lowercase()
            )
        };
        let mut raw = vec![0x01, 0x71, 0x12, 0x20];
        raw.extend_from_slice(&[7u8; 32]);
        assert_eq!(parse_cid(&encode(&raw)), Err(CidError::Codec(0x71)));
        raw[0] = 0x00;
        assert_eq!(parse_cid(&encode(&raw)), Err(CidError::Version(0)));
        raw[0] = 0x01;
        raw[1] = 0x55;
        raw[2] = 0x13;
        assert_eq!(
            parse_cid(&encode(&raw)),
            Err(CidError::Multihash {
                code: 0x13,
                len: 0x20
            })
        );
        raw[2] = 0x12;
        raw.push(0);
        assert_eq!(
            parse_cid(&encode(&raw)),
            Err(CidError::Length { actual: 37 })
        );
        raw.pop();
        assert_eq!(parse_cid(&encode(&raw)), Ok([7u8; 32]));
    }
}

/// Generated input: a CID text names one digest and a digest has one CID text; any other
/// text is refused without a panic.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn assert_canonical(text: &str) -> Result<(), TestCaseError> {
        if let Ok(digest) = parse_cid(text) {
            prop_assert_eq!(cid_from_digest(&digest), text);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn a_digest_round_trips(digest in any::<[u8; 32]>()) {
            let text = cid_from_digest(&digest);
            prop_assert_eq!(text.len(), 59);
            prop_assert_eq!(parse_cid(&text), Ok(digest));
        }

        #[test]
        fn any_text_is_refused_or_canonical(text in any::<String>()) {
            assert_canonical(&text)?;
        }

        #[test]
        fn base32_looking_text_is_refused_or_canonical(text in "[bB][a-z2-7A-Z=]{50,62}") {
            assert_canonical(&text)?;
        }

        #[test]
        fn a_changed_character_is_refused(digest in any::<[u8; 32]>(), at in 1usize..59, to in "[a-z2-7]") {
            let text = cid_from_digest(&digest);
            let mut changed = text.clone();
            changed.replace_range(at..=at, &to);
            if changed != text {
                prop_assert_ne!(parse_cid(&changed), Ok(digest));
            }
        }

        #[test]
        fn entry_text_is_its_own_canonical_form(
            entry_type in any::<String>(),
            title in proptest::option::of(any::<String>()),
            content in any::<String>(),
            tags in proptest::option::of(proptest::collection::vec(any::<String>(), 0..5)),
        ) {
            let text = entry_canonical_text(&entry_type, title.as_deref(), &content, tags.as_deref());
            let canonical = jcs::canonicalize_str(&text).unwrap();
            prop_assert_eq!(String::from_utf8(canonical).unwrap(), text);
            let cid = entry_cid(&entry_type, title.as_deref(), &content, tags.as_deref());
            prop_assert!(parse_cid(&cid).is_ok());
        }
    }
}
