//! SQLite FTS5's own tokenizers, called directly.
//!
//! An FTS5 table tokenizes each text it indexes with a tokenizer registered on its
//! connection and stores every token, cut to [`MAX_TOKEN_BYTES`]. A [`Tokenizer`] opens a
//! private in-memory connection of the SQLite library sqlx links (the same build, so the
//! same tokenizers), finds one there by name through FTS5's C API (`fts5_api` and its
//! `xFindTokenizer`), and runs it on a text: the tokens a table whose `tokenize` option names
//! the same tokenizer and arguments stores for that text, with no table, statement or page
//! written to get them.
//!
//! This is the workspace's one crate with `unsafe` code: the calls into that C API.

use std::collections::BTreeMap;
use std::ffi::{CString, NulError, c_char, c_int, c_void};
use std::ptr;

use libsqlite3_sys as ffi;

/// The longest token FTS5 stores, in bytes (`FTS5_MAX_TOKEN_SIZE`): a longer one is cut.
pub const MAX_TOKEN_BYTES: usize = 32768;

/// Why a tokenizer could not be made or run.
#[derive(Debug, thiserror::Error)]
pub enum Fts5Error {
    #[error("opening an in-memory SQLite connection failed (SQLite code {0})")]
    Open(c_int),
    #[error("this SQLite has no FTS5 (its fts5() function gave no API)")]
    NoFts5,
    #[error("FTS5 has no tokenizer named `{0}`")]
    UnknownTokenizer(String),
    #[error("FTS5's `{name}` tokenizer refused the arguments {args:?} (SQLite code {code})")]
    Arguments {
        name: String,
        args: Vec<String>,
        code: c_int,
    },
    #[error("a tokenizer's name or arguments hold a NUL byte")]
    Nul(#[from] NulError),
    #[error("a text of {0} bytes is longer than FTS5 tokenizes")]
    TooLong(usize),
    #[error("the tokenizer failed (SQLite code {0})")]
    Tokenize(c_int),
}

/// A text's tokens as an FTS5 index stores them: each distinct token with its number of
/// occurrences, in byte order, and the number of occurrences in all.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TokenCounts {
    pub terms: BTreeMap<String, i64>,
    pub tokens: i64,
}

/// One of FTS5's tokenizers, made with its arguments on a connection of its own.
#[derive(Debug)]
pub struct Tokenizer {
    db: *mut ffi::sqlite3,
    methods: ffi::fts5_tokenizer,
    instance: *mut ffi::Fts5Tokenizer,
}

// SAFETY: the connection is opened with SQLITE_OPEN_FULLMUTEX (serialized: usable from any
// thread), and the tokenizer instance is only ever used through `&mut self`, by one thread
// at a time; nothing in it is tied to the thread that made it.
unsafe impl Send for Tokenizer {}

impl Tokenizer {
    /// FTS5's tokenizer `name` with `args`, as the table option `tokenize = 'name args…'`
    /// makes it (e.g. `("unicode61", ["remove_diacritics", "2"])`).
    pub fn new(name: &str, args: &[&str]) -> Result<Self, Fts5Error> {
        let c_name = CString::new(name)?;
        let c_args = args
            .iter()
            .map(|arg| CString::new(*arg))
            .collect::<Result<Vec<_>, _>>()?;
        let mut tokenizer = Tokenizer {
            db: ptr::null_mut(),
            methods: ffi::fts5_tokenizer {
                xCreate: None,
                xDelete: None,
                xTokenize: None,
            },
            instance: ptr::null_mut(),
        };
        let flags =
            ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE | ffi::SQLITE_OPEN_FULLMUTEX;
        // SAFETY: the file name is a NUL-terminated string and `tokenizer.db` a valid place
        // for the handle, which SQLite sets even when opening fails; `Drop` closes it.
        let code = unsafe {
            ffi::sqlite3_open_v2(c":memory:".as_ptr(), &mut tokenizer.db, flags, ptr::null())
        };
        if code != ffi::SQLITE_OK {
            return Err(Fts5Error::Open(code));
        }
        let api = fts5_api(tokenizer.db)?;
        let mut user_data: *mut c_void = ptr::null_mut();
        // SAFETY: `api` is the connection's FTS5 API, which lives as long as the connection.
        let find = unsafe { (*api).xFindTokenizer }.ok_or(Fts5Error::NoFts5)?;
        // SAFETY: `api` is valid (above), the name is NUL-terminated, and both out pointers
        // are valid places for what FTS5 writes.
        let code = unsafe { find(api, c_name.as_ptr(), &mut user_data, &mut tokenizer.methods) };
        if code != ffi::SQLITE_OK {
            return Err(Fts5Error::UnknownTokenizer(name.to_owned()));
        }
        let create = tokenizer
            .methods
            .xCreate
            .ok_or_else(|| Fts5Error::UnknownTokenizer(name.to_owned()))?;
        let refused = |code| Fts5Error::Arguments {
            name: name.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            code,
        };
        let mut argv: Vec<*const c_char> = c_args.iter().map(|arg| arg.as_ptr()).collect();
        let argc = c_int::try_from(argv.len()).map_err(|_| refused(ffi::SQLITE_TOOBIG))?;
        // SAFETY: `user_data` is what `xFindTokenizer` gave for this tokenizer; `argv` holds
        // `argc` NUL-terminated strings that outlive the call (FTS5 copies what it keeps);
        // the instance pointer is a valid place for the new tokenizer, freed by `Drop`.
        let code = unsafe { create(user_data, argv.as_mut_ptr(), argc, &mut tokenizer.instance) };
        if code != ffi::SQLITE_OK || tokenizer.instance.is_null() {
            return Err(refused(code));
        }
        Ok(tokenizer)
    }

    /// The tokens an FTS5 index with this tokenizer stores for `text` as a document.
    pub fn count(&mut self, text: &str) -> Result<TokenCounts, Fts5Error> {
        let length = c_int::try_from(text.len()).map_err(|_| Fts5Error::TooLong(text.len()))?;
        let tokenize = self
            .methods
            .xTokenize
            .ok_or(Fts5Error::Tokenize(ffi::SQLITE_MISUSE))?;
        let mut counts = TokenCounts::default();
        // SAFETY: `instance` was made by this tokenizer's `xCreate` and is used by this
        // thread only (`&mut self`); the text pointer and length describe `text`, alive for
        // the call; `counts` is the context `on_token` expects, alive for the call.
        let code = unsafe {
            tokenize(
                self.instance,
                (&raw mut counts).cast(),
                ffi::FTS5_TOKENIZE_DOCUMENT,
                text.as_ptr().cast(),
                length,
                Some(on_token),
            )
        };
        if code != ffi::SQLITE_OK {
            return Err(Fts5Error::Tokenize(code));
        }
        Ok(counts)
    }
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        if let (Some(delete), false) = (self.methods.xDelete, self.instance.is_null()) {
            // SAFETY: `instance` was made by this tokenizer's `xCreate` and is deleted once.
            unsafe { delete(self.instance) };
        }
        // SAFETY: `db` is the handle `sqlite3_open_v2` gave (or null, which SQLite accepts),
        // closed once; no statement of it is left open.
        unsafe { ffi::sqlite3_close(self.db) };
    }
}

/// The FTS5 API of connection `db`, which SQLite hands out through the `fts5()` SQL
/// function as a pointer bound with the type `fts5_api_ptr`.
fn fts5_api(db: *mut ffi::sqlite3) -> Result<*mut ffi::fts5_api, Fts5Error> {
    let mut statement: *mut ffi::sqlite3_stmt = ptr::null_mut();
    // SAFETY: `db` is an open connection, the SQL NUL-terminated, the out pointer valid.
    let code = unsafe {
        ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut statement,
            ptr::null_mut(),
        )
    };
    if code != ffi::SQLITE_OK {
        // SAFETY: finalizing a null or failed statement is a no-op.
        unsafe { ffi::sqlite3_finalize(statement) };
        return Err(Fts5Error::NoFts5);
    }
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: the statement is prepared; `api` outlives its only step (finalized below),
    // and the type string is a static NUL-terminated string, as the binding requires.
    unsafe {
        ffi::sqlite3_bind_pointer(
            statement,
            1,
            (&raw mut api).cast(),
            c"fts5_api_ptr".as_ptr(),
            None,
        )
    };
    // SAFETY: the statement is prepared and bound; stepping it writes the API to `api`.
    unsafe { ffi::sqlite3_step(statement) };
    // SAFETY: the statement is finalized once, here.
    unsafe { ffi::sqlite3_finalize(statement) };
    if api.is_null() {
        return Err(Fts5Error::NoFts5);
    }
    Ok(api)
}

/// FTS5's callback for each token: counts it as the index stores it (cut to
/// [`MAX_TOKEN_BYTES`]).
unsafe extern "C" fn on_token(
    context: *mut c_void,
    _flags: c_int,
    token: *const c_char,
    length: c_int,
    _start: c_int,
    _end: c_int,
) -> c_int {
    // SAFETY: `context` is the `TokenCounts` `Tokenizer::count` passed, borrowed by this
    // call only.
    let counts = unsafe { &mut *context.cast::<TokenCounts>() };
    let length = usize::try_from(length).unwrap_or(0).min(MAX_TOKEN_BYTES);
    let bytes: &[u8] = if token.is_null() || length == 0 {
        &[]
    } else {
        // SAFETY: FTS5 hands a buffer of at least `length` bytes, valid during the callback.
        unsafe { std::slice::from_raw_parts(token.cast::<u8>(), length) }
    };
    let term = String::from_utf8_lossy(bytes);
    match counts.terms.get_mut(term.as_ref()) {
        Some(count) => *count += 1,
        None => {
            counts.terms.insert(term.into_owned(), 1);
        }
    }
    counts.tokens += 1;
    ffi::SQLITE_OK
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    fn unicode61() -> Tokenizer {
        Tokenizer::new("unicode61", &["remove_diacritics", "2"]).unwrap()
    }

    #[test]
    fn counts_folded_tokens_in_byte_order() {
        let counts = unicode61()
            .count("Café, CAFE and the café-au-lait: 42 x42")
            .unwrap();
        let terms: Vec<(&str, i64)> = counts.terms.iter().map(|(t, n)| (t.as_str(), *n)).collect();
        assert_eq!(
            terms,
            [
                ("42", 1),
                ("and", 1),
                ("au", 1),
                ("cafe", 3),
                ("lait", 1),
                ("the", 1),
                ("x42", 1)
            ]
        );
        assert_eq!(counts.tokens, 9);
    }

    #[test]
    fn text_without_tokens_counts_nothing() {
        assert_eq!(unicode61().count(" .,;\n").unwrap(), TokenCounts::default());
    }

    #[test]
    fn unknown_tokenizers_and_arguments_are_refused() {
        assert!(matches!(
            Tokenizer::new("no-such-tokenizer", &[]),
            Err(Fts5Error::UnknownTokenizer(_))
        ));
        assert!(matches!(
            Tokenizer::new("unicode61", &["remove_diacritics", "7"]),
            Err(Fts5Error::Arguments { .. })
        ));
    }
}
