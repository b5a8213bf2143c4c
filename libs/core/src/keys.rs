//! Ed25519 keys, signatures and the two signed-message constructions Noema inherits.
//!
//! Encodings follow the seed systems (compat/moltnet.md §4, compat/open-cognition.md §5):
//! keys, seeds and signatures are *standard, padded* base64 of the raw bytes; MoltNet
//! prefixes public keys with `ed25519:`. Parsing here is deliberately strict (standard
//! alphabet, padding required, canonical trailing bits, exact length): open-cognition
//! compares key text as strings, so accepting two spellings of one key would make
//! trust-on-first-use reject the second spelling later with a confusing mismatch.

use std::fmt;
use std::str::FromStr;

use data_encoding::BASE64;
use ed25519_dalek::{Signer, Verifier};
use sha2::{Digest, Sha256};

/// MoltNet's `ed25519:` public-key prefix.
pub const PUBLIC_KEY_PREFIX: &str = "ed25519:";

/// Domain tag at the start of MoltNet signing bytes.
pub const MOLTNET_SIGNING_DOMAIN: &[u8] = b"moltnet:v1";

/// What is being decoded, for error messages that say what to fix.
struct Material {
    what: &'static str,
    hint: &'static str,
}

const PUBLIC_KEY: Material = Material {
    what: "public key",
    hint: "32 raw bytes in standard base64: 44 characters ending in '='",
};
const SIGNATURE: Material = Material {
    what: "signature",
    hint: "64 raw bytes in standard base64: 88 characters ending in '=='",
};
const SEED: Material = Material {
    what: "private key seed",
    hint: "a 32-byte Ed25519 seed in standard base64: 44 characters ending in '='",
};

/// Why a key, signature, seed or fingerprint could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{what} is empty; expected {hint}")]
    Empty {
        what: &'static str,
        hint: &'static str,
    },
    #[error("{what} has unknown prefix {prefix:?}; use \"ed25519:\" or no prefix")]
    UnknownPrefix { what: &'static str, prefix: String },
    #[error(
        "{what} uses the URL-safe base64 alphabet ('-' or '_'); use standard base64 with '+', '/' and '=' padding"
    )]
    UrlSafeBase64 { what: &'static str },
    #[error("{what} contains whitespace at byte {position}; remove spaces and line breaks")]
    Whitespace { what: &'static str, position: usize },
    #[error(
        "{what} is {len} characters, not a multiple of 4; standard base64 keeps its '=' padding (expected {hint})"
    )]
    Unpadded {
        what: &'static str,
        len: usize,
        hint: &'static str,
    },
    #[error("{what} is not valid standard base64 ({detail}); expected {hint}")]
    InvalidBase64 {
        what: &'static str,
        detail: String,
        hint: &'static str,
    },
    #[error("{what} decodes to {actual} bytes but must be exactly {expected} bytes ({hint})")]
    WrongLength {
        what: &'static str,
        expected: usize,
        actual: usize,
        hint: &'static str,
    },
    #[error(
        "fingerprint {0:?} must be 16 hex digits in four groups of 4 joined by '-', e.g. \"A1B2-C3D4-E5F6-0718\""
    )]
    Fingerprint(String),
    #[error("could not read randomness from the operating system: {0}")]
    Randomness(String),
}

/// Strict standard-base64 decoding of exactly `N` bytes, with an error that names the
/// most likely mistake.
fn decode_exact<const N: usize>(text: &str, m: &Material) -> Result<[u8; N], KeyError> {
    let (what, hint) = (m.what, m.hint);
    if text.is_empty() {
        return Err(KeyError::Empty { what, hint });
    }
    if text.contains(['-', '_']) {
        return Err(KeyError::UrlSafeBase64 { what });
    }
    if let Some(position) = text.find(|c: char| c.is_whitespace()) {
        return Err(KeyError::Whitespace { what, position });
    }
    if !text.len().is_multiple_of(4) {
        return Err(KeyError::Unpadded {
            what,
            len: text.len(),
            hint,
        });
    }
    // `BASE64` requires padding and zero trailing bits, so every byte string has exactly
    // one accepted text.
    let bytes = BASE64
        .decode(text.as_bytes())
        .map_err(|e| KeyError::InvalidBase64 {
            what,
            detail: e.to_string(),
            hint,
        })?;
    let out: [u8; N] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| KeyError::WrongLength {
            what,
            expected: N,
            actual: bytes.len(),
            hint,
        })?;
    Ok(out)
}

/// An Ed25519 public key: 32 raw bytes.
///
/// Any 32 bytes are accepted, as in both seed systems (which check only the length); bytes
/// that are not a curve point simply never verify.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    pub fn from_bytes(bytes: [u8; 32]) -> PublicKey {
        PublicKey(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses `ed25519:<base64>` or bare `<base64>` (MoltNet strips an optional prefix).
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        match text.split_once(':') {
            None => PublicKey::from_base64(text),
            Some(("ed25519", b64)) => PublicKey::from_base64(b64),
            Some((prefix, _)) => Err(KeyError::UnknownPrefix {
                what: PUBLIC_KEY.what,
                prefix: prefix.to_owned(),
            }),
        }
    }

    /// Parses bare standard base64 only (open-cognition's `public_key` field).
    pub fn from_base64(text: &str) -> Result<PublicKey, KeyError> {
        decode_exact(text, &PUBLIC_KEY).map(PublicKey)
    }

    /// Bare standard base64 (44 characters), as open-cognition stores it.
    pub fn to_base64(&self) -> String {
        BASE64.encode(&self.0)
    }

    /// `ed25519:<base64>`, as MoltNet stores it.
    pub fn to_prefixed(&self) -> String {
        format!("{PUBLIC_KEY_PREFIX}{}", self.to_base64())
    }

    /// MoltNet fingerprint, see [`fingerprint`].
    pub fn fingerprint(&self) -> String {
        fingerprint(self)
    }

    /// True when the bytes are not a valid curve point, or the point has small order. A
    /// weak key admits signatures that verify for many messages, so services may refuse
    /// to register one even though the seed systems do not check.
    pub fn is_weak(&self) -> bool {
        ed25519_dalek::VerifyingKey::from_bytes(&self.0).map_or(true, |k| k.is_weak())
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PublicKey::parse(s)
    }
}

/// Displays the MoltNet form `ed25519:<base64>`.
impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_prefixed())
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.to_prefixed())
    }
}

/// MoltNet key fingerprint: SHA-256 of the 32 raw key bytes, first 16 hex digits in upper
/// case, as `XXXX-XXXX-XXXX-XXXX`.
pub fn fingerprint(key: &PublicKey) -> String {
    let hex = data_encoding::HEXUPPER.encode(&Sha256::digest(key.as_bytes())[..8]);
    let mut out = String::with_capacity(19);
    for (i, ch) in hex.chars().enumerate() {
        if i > 0 && i % 4 == 0 {
            out.push('-');
        }
        out.push(ch);
    }
    out
}

/// Validates a fingerprint in either case and returns it upper-cased, which is how MoltNet
/// stores and looks them up.
pub fn parse_fingerprint(text: &str) -> Result<String, KeyError> {
    let well_formed = text.len() == 19
        && text.char_indices().all(|(i, c)| {
            if i % 5 == 4 {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    if well_formed {
        Ok(text.to_ascii_uppercase())
    } else {
        Err(KeyError::Fingerprint(text.to_owned()))
    }
}

/// An Ed25519 signature: 64 raw bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signature([u8; 64]);

impl Signature {
    pub fn from_bytes(bytes: [u8; 64]) -> Signature {
        Signature(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 64] {
        &self.0
    }

    /// Parses strict standard base64 of exactly 64 bytes (88 characters).
    pub fn from_base64(text: &str) -> Result<Signature, KeyError> {
        decode_exact(text, &SIGNATURE).map(Signature)
    }

    pub fn to_base64(&self) -> String {
        BASE64.encode(&self.0)
    }
}

impl FromStr for Signature {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Signature::from_base64(s)
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({})", self.to_base64())
    }
}

/// RFC 8032 Ed25519 (pure) verification; any failure, including key bytes that are not a
/// curve point, is `false`.
///
/// Uses dalek's `verify`, not `verify_strict`. `verify` is the cofactorless check that
/// rejects non-canonical S and compares the recomputed R by its encoding, which is exactly
/// Go's `crypto/ed25519.Verify` (open-cognition). `@noble/ed25519` v2 (MoltNet) defaults to
/// ZIP-215 rules, which accept a superset of that; the difference only concerns crafted
/// signatures involving small-order points, never a signature an honest RFC 8032 signer
/// produces. `verify_strict` would additionally reject small-order keys and R values that
/// both seed systems accept, so it could refuse requests they accept; callers that want to
/// refuse weak keys check [`PublicKey::is_weak`] at registration instead.
pub fn verify(key: &PublicKey, message: &[u8], signature: &Signature) -> bool {
    let Ok(vk) = ed25519_dalek::VerifyingKey::from_bytes(key.as_bytes()) else {
        return false;
    };
    let sig = ed25519_dalek::Signature::from_bytes(signature.as_bytes());
    vk.verify(message, &sig).is_ok()
}

/// An Ed25519 signing key built from a 32-byte seed. The seed is wiped on drop (dalek's
/// `zeroize` feature) and never shown by `Debug`.
#[derive(Clone)]
pub struct SigningKeyPair(ed25519_dalek::SigningKey);

impl SigningKeyPair {
    pub fn from_seed(seed: &[u8; 32]) -> SigningKeyPair {
        SigningKeyPair(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// Parses a seed in strict standard base64 (44 characters).
    pub fn from_seed_base64(text: &str) -> Result<SigningKeyPair, KeyError> {
        let mut seed: [u8; 32] = decode_exact(text, &SEED)?;
        let pair = SigningKeyPair::from_seed(&seed);
        wipe(&mut seed);
        Ok(pair)
    }

    /// A fresh key pair from the operating system's random source.
    pub fn generate() -> Result<SigningKeyPair, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Randomness(e.to_string()))?;
        let pair = SigningKeyPair::from_seed(&seed);
        wipe(&mut seed);
        Ok(pair)
    }

    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key().to_bytes())
    }

    /// RFC 8032 Ed25519 (pure) signature over exactly `message`.
    pub fn sign(&self, message: &[u8]) -> Signature {
        Signature(self.0.sign(message).to_bytes())
    }

    /// The seed in standard base64, the form agents keep their private key in.
    pub fn seed_base64(&self) -> String {
        BASE64.encode(self.0.as_bytes())
    }
}

impl fmt::Debug for SigningKeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKeyPair(public: {})", self.public_key())
    }
}

/// Best-effort wipe of a temporary seed copy; `black_box` keeps the writes from being
/// optimized away as dead stores.
fn wipe(bytes: &mut [u8]) {
    bytes.fill(0);
    std::hint::black_box(bytes);
}

/// The bytes a MoltNet agent signs for a signing request:
/// `"moltnet:v1" ‖ u32be(32) ‖ SHA-256(message) ‖ u32be(len(nonce)) ‖ nonce`, all UTF-8.
/// With a canonical UUID nonce this is 86 bytes.
pub fn moltnet_signing_bytes(message: &str, nonce: &str) -> Vec<u8> {
    let digest = Sha256::digest(message.as_bytes());
    // Nonces are server-generated UUIDs; a nonce over 4 GiB cannot occur, and since the
    // nonce is the last field the encoding stays unambiguous even if the length saturated.
    let nonce_len = u32::try_from(nonce.len()).unwrap_or(u32::MAX);
    let mut out =
        Vec::with_capacity(MOLTNET_SIGNING_DOMAIN.len() + 4 + digest.len() + 4 + nonce.len());
    out.extend_from_slice(MOLTNET_SIGNING_DOMAIN);
    out.extend_from_slice(&32u32.to_be_bytes());
    out.extend_from_slice(&digest);
    out.extend_from_slice(&nonce_len.to_be_bytes());
    out.extend_from_slice(nonce.as_bytes());
    out
}

/// The text an open-cognition agent signs for a reference:
/// `id:canonical_object_id:agent_id:created_at`, using the four strings exactly as
/// submitted (agent ids may themselves contain ':'; nothing is normalized).
pub fn reference_signing_message(
    id: &str,
    canonical_object_id: &str,
    agent_id: &str,
    created_at: &str,
) -> String {
    [id, canonical_object_id, agent_id, created_at].join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    // compat/moltnet.md §4 key vector. The seed is also RFC 8032 §7.1 TEST 1.
    const SEED_B64: &str = "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=";
    const PUBLIC_PREFIXED: &str = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
    const FINGERPRINT: &str = "21FE-31DF-A154-A261";

    fn pair() -> SigningKeyPair {
        SigningKeyPair::from_seed_base64(SEED_B64).unwrap_or_else(|e| panic!("{e}"))
    }

    fn hex(bytes: &[u8]) -> String {
        data_encoding::HEXLOWER.encode(bytes)
    }

    #[test]
    fn moltnet_key_vector() {
        let kp = pair();
        let pk = kp.public_key();
        assert_eq!(pk.to_prefixed(), PUBLIC_PREFIXED);
        assert_eq!(pk.to_string(), PUBLIC_PREFIXED);
        assert_eq!(pk.to_base64(), &PUBLIC_PREFIXED[8..]);
        assert_eq!(fingerprint(&pk), FINGERPRINT);
        assert_eq!(pk.fingerprint(), FINGERPRINT);
        assert_eq!(kp.seed_base64(), SEED_B64);
        assert_eq!(PublicKey::parse(PUBLIC_PREFIXED), Ok(pk));
        assert_eq!(PublicKey::parse(&PUBLIC_PREFIXED[8..]), Ok(pk));
        assert_eq!(PUBLIC_PREFIXED.parse::<PublicKey>(), Ok(pk));
        assert!(!pk.is_weak());
    }

    /// RFC 8032 §7.1 TEST 1 (empty message) and TEST 2 (one byte 0x72).
    #[test]
    fn rfc8032_vectors() {
        let kp = pair();
        assert_eq!(
            hex(kp.public_key().as_bytes()),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
        let sig = kp.sign(b"");
        assert_eq!(
            hex(sig.as_bytes()),
            concat!(
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555",
                "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
            )
        );
        assert!(verify(&kp.public_key(), b"", &sig));

        let seed2 = data_encoding::HEXLOWER
            .decode(b"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
            .unwrap_or_default();
        let seed2: [u8; 32] = seed2.try_into().unwrap_or([0; 32]);
        let kp2 = SigningKeyPair::from_seed(&seed2);
        assert_eq!(
            hex(kp2.public_key().as_bytes()),
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
        );
        assert_eq!(
            hex(kp2.sign(&[0x72]).as_bytes()),
            concat!(
                "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da",
                "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
            )
        );
    }

    #[test]
    fn sign_verify_round_trip_and_failures() {
        let kp = pair();
        let msg = b"hello";
        let sig = kp.sign(msg);
        assert!(verify(&kp.public_key(), msg, &sig));
        assert!(!verify(&kp.public_key(), b"hellp", &sig));

        let other = SigningKeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(other.public_key(), kp.public_key());
        assert!(!verify(&other.public_key(), msg, &sig));
        assert!(verify(&other.public_key(), msg, &other.sign(msg)));

        let mut tampered = *sig.as_bytes();
        tampered[0] ^= 1;
        assert!(!verify(
            &kp.public_key(),
            msg,
            &Signature::from_bytes(tampered)
        ));

        // Non-canonical S (S + L) must fail, as in Go and noble.
        let mut s_plus_l = *sig.as_bytes();
        let l: [u8; 32] = [
            0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9,
            0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ];
        let mut carry = 0u16;
        for i in 0..32 {
            let sum = u16::from(s_plus_l[32 + i]) + u16::from(l[i]) + carry;
            s_plus_l[32 + i] = (sum & 0xff) as u8;
            carry = sum >> 8;
        }
        assert!(!verify(
            &kp.public_key(),
            msg,
            &Signature::from_bytes(s_plus_l)
        ));

        // Bytes that are not a curve point (y = 2 has no matching x) never verify and do
        // not panic.
        let mut y2 = [0u8; 32];
        y2[0] = 2;
        let not_a_point = PublicKey::from_bytes(y2);
        assert!(not_a_point.is_weak());
        assert!(!verify(&not_a_point, msg, &sig));

        // The identity point (y = 1) is a valid encoding of small order: weak.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(PublicKey::from_bytes(identity).is_weak());
    }

    #[test]
    fn signature_base64_round_trip() {
        let sig = pair().sign(b"x");
        let text = sig.to_base64();
        assert_eq!(text.len(), 88);
        assert!(text.ends_with("=="));
        assert_eq!(Signature::from_base64(&text), Ok(sig));
        assert_eq!(text.parse::<Signature>(), Ok(sig));
        assert_eq!(sig.to_string(), text);
    }

    #[test]
    fn generated_keys_round_trip_through_their_seed() {
        let kp = SigningKeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let again =
            SigningKeyPair::from_seed_base64(&kp.seed_base64()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.public_key(), kp.public_key());
        assert!(!format!("{kp:?}").contains(&kp.seed_base64()));
    }

    #[test]
    fn short_key_is_rejected_with_a_clear_error() {
        let short = BASE64.encode(&[7u8; 31]);
        let err = PublicKey::parse(&short).err();
        assert_eq!(
            err,
            Some(KeyError::WrongLength {
                what: "public key",
                expected: 32,
                actual: 31,
                hint: PUBLIC_KEY.hint,
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).unwrap_or_default(),
            "public key decodes to 31 bytes but must be exactly 32 bytes \
             (32 raw bytes in standard base64: 44 characters ending in '=')"
        );
        let sig = BASE64.encode(&[7u8; 63]);
        assert!(matches!(
            Signature::from_base64(&sig),
            Err(KeyError::WrongLength {
                expected: 64,
                actual: 63,
                ..
            })
        ));
    }

    #[test]
    fn url_safe_base64_is_rejected_with_a_clear_error() {
        // A key whose standard encoding contains both '+' and '/'.
        let key = PublicKey::from_bytes([0xfb; 32]);
        let std = key.to_base64();
        assert!(std.contains('+') || std.contains('/'));
        let url = std.replace('+', "-").replace('/', "_");
        let err = PublicKey::parse(&format!("ed25519:{url}")).err();
        assert_eq!(err, Some(KeyError::UrlSafeBase64 { what: "public key" }));
        assert!(
            err.map(|e| e.to_string())
                .unwrap_or_default()
                .contains("use standard base64 with '+', '/' and '=' padding")
        );
        assert_eq!(PublicKey::parse(&std), Ok(key));
    }

    #[test]
    fn other_malformed_inputs_are_rejected() {
        let std = &PUBLIC_PREFIXED[8..];
        // Missing padding.
        assert!(matches!(
            PublicKey::parse(std.trim_end_matches('=')),
            Err(KeyError::Unpadded { len: 43, .. })
        ));
        // Non-zero trailing bits: 'o' → 'p' changes only the unused low bits.
        let noncanonical = std.replace("o=", "p=");
        assert!(matches!(
            PublicKey::parse(&noncanonical),
            Err(KeyError::InvalidBase64 { .. })
        ));
        assert!(matches!(
            PublicKey::parse(&format!("{std}\n")),
            Err(KeyError::Whitespace { position: 44, .. })
        ));
        assert!(matches!(PublicKey::parse(""), Err(KeyError::Empty { .. })));
        assert!(matches!(
            PublicKey::parse("ed25519:"),
            Err(KeyError::Empty { .. })
        ));
        assert_eq!(
            PublicKey::parse(&format!("ED25519:{std}")),
            Err(KeyError::UnknownPrefix {
                what: "public key",
                prefix: "ED25519".to_owned()
            })
        );
        // The prefix is not valid on the bare-only parser.
        assert!(PublicKey::from_base64(PUBLIC_PREFIXED).is_err());
        assert!(matches!(
            PublicKey::parse("!!!!"),
            Err(KeyError::InvalidBase64 { .. })
        ));
        assert!(SigningKeyPair::from_seed_base64(&BASE64.encode(&[1u8; 64])).is_err());
    }

    #[test]
    fn fingerprints_parse_in_either_case() {
        assert_eq!(
            parse_fingerprint("21fe-31df-a154-a261"),
            Ok(FINGERPRINT.to_owned())
        );
        assert_eq!(parse_fingerprint(FINGERPRINT), Ok(FINGERPRINT.to_owned()));
        assert_eq!(
            parse_fingerprint("21Fe-31dF-A154-a261"),
            Ok(FINGERPRINT.to_owned())
        );
        for bad in [
            "21FE31DFA154A261",
            "21FE-31DF-A154-A26",
            "21FE-31DF-A154-A2611",
            "21FE-31DF-A154_A261",
            "21FE-31DF-A154-A26G",
            "-21FE-31DF-A154-A26",
            " 21FE-31DF-A154-A261",
            "",
        ] {
            assert_eq!(
                parse_fingerprint(bad),
                Err(KeyError::Fingerprint(bad.to_owned())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn moltnet_signing_bytes_layout() {
        let nonce = "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b";
        let message = "bafkreidxfykbrvutwidnpsnto4ij6kpe6r3oofqthfc5ohvcmrpsw3irse";
        let bytes = moltnet_signing_bytes(message, nonce);
        assert_eq!(bytes.len(), 86);
        assert_eq!(&bytes[..10], b"moltnet:v1");
        assert_eq!(&bytes[10..14], &[0, 0, 0, 32]);
        assert_eq!(
            &bytes[14..46],
            Sha256::digest(message.as_bytes()).as_slice()
        );
        assert_eq!(&bytes[46..50], &[0, 0, 0, 36]);
        assert_eq!(&bytes[50..], nonce.as_bytes());
        // Multi-byte UTF-8: lengths count bytes, not characters.
        let b = moltnet_signing_bytes("é", "ü");
        assert_eq!(b.len(), 10 + 4 + 32 + 4 + 2);
        assert_eq!(&b[46..50], &[0, 0, 0, 2]);
    }

    /// Signature over MoltNet signing bytes, cross-checked with Node.js `crypto.sign`
    /// using the same seed, message and nonce.
    #[test]
    fn moltnet_signature_matches_node() {
        let bytes = moltnet_signing_bytes(
            "bafkreidxfykbrvutwidnpsnto4ij6kpe6r3oofqthfc5ohvcmrpsw3irse",
            "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b",
        );
        let kp = pair();
        let sig = kp.sign(&bytes);
        assert_eq!(sig.to_base64(), NODE_MOLTNET_SIG);
        assert!(verify(&kp.public_key(), &bytes, &sig));
    }

    const NODE_MOLTNET_SIG: &str =
        "VAAbYxB7VMBU2ABdWk5sY1CBFBc5yCnkclmgYJFAxXQVQPqhm+ZpuVlo0Gp6D/4LkF/jL3Q5v/gTx2WzclUNCw==";

    #[test]
    fn reference_message_joins_fields_verbatim() {
        assert_eq!(
            reference_signing_message(
                "0b7c8d2e-1f3a-4b5c-9d6e-7f8091a2b3c4",
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "agent:observer:1",
                "2026-04-14T10:00:00.5+02:00"
            ),
            "0b7c8d2e-1f3a-4b5c-9d6e-7f8091a2b3c4:\
             sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855:\
             agent:observer:1:2026-04-14T10:00:00.5+02:00"
        );
        assert_eq!(reference_signing_message("", "", "", ""), ":::");
    }
}

/// The bytes an agent signs with its CURRENT key to rotate to `new_key`: RFC 8785 JSON of
/// `{"action":"rotate_key","agent_id","new_public_key","old_public_key","v":"noema:key-rotation:v1"}`.
/// Naming both keys means a proof cannot be replayed after a later rotation.
pub fn key_rotation_message(
    agent_id: &str,
    old_key: &PublicKey,
    new_key: &PublicKey,
) -> Result<Vec<u8>, crate::jcs::JcsError> {
    crate::jcs::canonicalize(&serde_json::json!({
        "action": "rotate_key",
        "agent_id": agent_id,
        "new_public_key": new_key.to_prefixed(),
        "old_public_key": old_key.to_prefixed(),
        "v": "noema:key-rotation:v1",
    }))
}

#[cfg(test)]
mod rotation_tests {
    use super::*;

    #[test]
    fn rotation_message_is_canonical_json_naming_both_keys() {
        let old = PublicKey::from_bytes([1; 32]);
        let new = PublicKey::from_bytes([2; 32]);
        let message = key_rotation_message("agent:a", &old, &new).unwrap_or_default();
        let text = String::from_utf8(message).unwrap_or_default();
        assert!(
            text.starts_with("{\"action\":\"rotate_key\",\"agent_id\":\"agent:a\""),
            "{text}"
        );
        assert!(text.contains(&old.to_prefixed()) && text.contains(&new.to_prefixed()));
        assert!(text.ends_with("\"v\":\"noema:key-rotation:v1\"}"), "{text}");
    }
}

/// Generated input: keys, seeds, signatures and fingerprints have one accepted text per
/// value, every other text is refused without a panic, and signatures verify only over
/// what was signed.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn check(text: &str) -> Result<(), TestCaseError> {
        if let Ok(key) = PublicKey::parse(text) {
            prop_assert!(text == key.to_base64() || text == key.to_prefixed());
        }
        if let Ok(signature) = Signature::from_base64(text) {
            prop_assert_eq!(signature.to_base64(), text);
        }
        if let Ok(pair) = SigningKeyPair::from_seed_base64(text) {
            let seed: [u8; 32] = BASE64.decode(text.as_bytes()).unwrap().try_into().unwrap();
            prop_assert_eq!(
                pair.public_key(),
                SigningKeyPair::from_seed(&seed).public_key()
            );
        }
        if let Ok(fingerprint) = parse_fingerprint(text) {
            prop_assert_eq!(fingerprint, text.to_ascii_uppercase());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_text_is_refused_or_canonical(text in any::<String>()) {
            check(&text)?;
        }

        #[test]
        fn base64_looking_text_is_refused_or_canonical(
            text in "(ed25519:|rsa:|)[A-Za-z0-9+/=_\\- ]{40,92}",
        ) {
            check(&text)?;
        }

        #[test]
        fn fingerprint_looking_text_is_refused_or_canonical(text in "[0-9a-fA-FgG\\-]{17,21}") {
            check(&text)?;
        }

        #[test]
        fn keys_and_signatures_round_trip(key in any::<[u8; 32]>(), signature in any::<[u8; 32]>()) {
            let key = PublicKey::from_bytes(key);
            prop_assert_eq!(PublicKey::parse(&key.to_base64()).unwrap(), key);
            prop_assert_eq!(PublicKey::parse(&key.to_prefixed()).unwrap(), key);
            prop_assert_eq!(parse_fingerprint(&key.fingerprint()).unwrap(), key.fingerprint());
            let mut bytes = [0u8; 64];
            bytes[..32].copy_from_slice(&signature);
            bytes[32..].copy_from_slice(&signature);
            let signature = Signature::from_bytes(bytes);
            prop_assert_eq!(Signature::from_base64(&signature.to_base64()).unwrap(), signature);
        }

        #[test]
        fn a_signature_verifies_only_its_message(seed in any::<[u8; 32]>(), message in any::<Vec<u8>>(), flip in any::<usize>()) {
            let pair = SigningKeyPair::from_seed(&seed);
            let signature = pair.sign(&message);
            prop_assert!(verify(&pair.public_key(), &message, &signature));
            let mut changed = message.clone();
            match changed.len() {
                0 => changed.push(0),
                n => changed[flip % n] ^= 1,
            }
            prop_assert!(!verify(&pair.public_key(), &changed, &signature));
        }
    }
}
