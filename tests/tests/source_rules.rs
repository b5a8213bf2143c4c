//! Rules the code of `libs/`, `services/` and `examples/` keeps, checked on the source text: callers
//! decide on an error's reason, never on its message; services build a `tonic::Status`
//! only through `noema_core::to_status`; `sha256:` ids are made only by `ContentId`, and
//! timestamps are formatted only by `noema_core::time`. Each offence is named by
//! file:line. Tests are exempt: `tests/` directories, `#[cfg(test)]` items and the test
//! harnesses listed in [`TEST_CODE`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// Library files that are test harnesses, not product code.
const TEST_CODE: &[&str] = &[
    // The object store conformance suite asserts the exact texts of its errors.
    "libs/store/src/object/conformance.rs",
    // Throwaway Postgres databases for tests.
    "libs/store/src/testing.rs",
    // TestCluster and its helpers.
    "libs/test-support/",
];

/// One rule: which files it reads and what an offending line looks like.
struct Rule {
    name: &'static str,
    applies_to: fn(&str) -> bool,
    offends: fn(&str) -> bool,
}

const RULES: &[Rule] = &[
    Rule {
        name: "decides on an error message's text (decide on Failure.reason)",
        applies_to: |_| true,
        offends: compares_a_message,
    },
    Rule {
        name: "builds a tonic::Status by hand (return the service's error; to_status converts it)",
        applies_to: |path| path.starts_with("services/") || path.starts_with("examples/service/"),
        offends: builds_a_status,
    },
    // Primitives (issue 14, item 6): ContentId is the only way to make or read a `sha256:` id.
    Rule {
        name: "writes a sha256: id by hand (use noema_core::content_id::ContentId)",
        applies_to: |path| path != "libs/core/src/content_id.rs",
        offends: handles_the_sha256_prefix,
    },
    // Primitives (issue 14, item 6): wire timestamps are formatted by `noema_core::time` only.
    Rule {
        name: "formats a timestamp by hand (use noema_core::time)",
        applies_to: |path| {
            (path.starts_with("libs/") || path.starts_with("services/"))
                && !path.starts_with("libs/core/")
        },
        offends: formats_a_timestamp,
    },
];

/// Whether `line` formats a `time` value with a format of its own (`.format(&Rfc3339)`,
/// `.format(format_description!(…))`) rather than through `noema_core::time`.
fn formats_a_timestamp(line: &str) -> bool {
    let code: String = line.split_whitespace().collect();
    code.match_indices(".format(").any(|(at, _)| {
        let argument = &code[at + ".format(".len()..];
        argument.starts_with("&Rfc3339")
            || argument.starts_with("&Iso8601")
            || argument.starts_with("&time::format_description")
            || argument.starts_with("&well_known::")
            || argument.starts_with("format_description!")
            || argument.starts_with("time::macros::format_description!")
    })
}

/// Whether `line` writes a `sha256:` id from a format string (`format!("sha256:{hex}")`,
/// also when rustfmt puts the string on the line after `format!(`) or handles the bare
/// prefix (`strip_prefix("sha256:")`, `["sha256:", hex].concat()`).
fn handles_the_sha256_prefix(line: &str) -> bool {
    line.contains("\"sha256:{") || line.contains("\"sha256:\"")
}

/// Operations that inspect a text's content.
const INSPECTIONS: &[&str] = &[
    "==",
    "!=",
    ".contains(",
    ".starts_with(",
    ".ends_with(",
    ".strip_prefix(",
    ".strip_suffix(",
    ".split(",
    ".find(",
    ".matches(",
];

/// Whether `line` (code, comments removed) compares or inspects an error's message text:
/// a status's `.message()`, an error value's `message` field, or an error's
/// `to_string()` against a literal.
fn compares_a_message(line: &str) -> bool {
    let inspected = |after: &str| {
        let after = after
            .trim_start_matches(".as_str()")
            .trim_start_matches(".as_ref()")
            .trim_start();
        INSPECTIONS.iter().any(|op| after.starts_with(op)) || after.starts_with(".as_bytes()")
    };
    // `status.message() == …`, `status.message().contains(…)`, `… == status.message()`.
    for (at, _) in line.match_indices(".message()") {
        let after = &line[at + ".message()".len()..];
        let before = line[..at].trim_end();
        if inspected(after)
            || before.ends_with("==")
            || before.ends_with("!=")
            || line[..at].contains("==")
            || line[..at].contains("!=")
            || is_matched(&line[..at])
        {
            return true;
        }
    }
    // `err.message == "…"`, `failure.message.starts_with(…)`, `match err.message.as_str()`.
    for receiver in [
        "err",
        "error",
        "e",
        "failure",
        "status",
        "problem",
        "rejection",
        "self",
    ] {
        let field = format!("{receiver}.message");
        for (at, _) in line.match_indices(&field) {
            let preceded_by_ident = line[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
            let after = &line[at + field.len()..];
            let continues_ident = after
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '(');
            if preceded_by_ident || continues_ident {
                continue;
            }
            if inspected(after) || is_matched(&line[..at]) {
                return true;
            }
        }
    }
    // `message == "…"` against a literal, and `….to_string() == "…"`.
    for subject in ["message", "to_string()"] {
        for (at, _) in line.match_indices(subject) {
            let after = line[at + subject.len()..].trim_start();
            for op in ["==", "!="] {
                if let Some(rest) = after.strip_prefix(op)
                    && rest.trim_start().starts_with('"')
                {
                    return true;
                }
            }
            if subject == "to_string()"
                && [".contains(\"", ".starts_with(\"", ".ends_with(\""]
                    .iter()
                    .any(|op| after.starts_with(op))
            {
                return true;
            }
        }
    }
    false
}

/// Whether the code before an expression makes it a `match` scrutinee.
fn is_matched(before: &str) -> bool {
    before.trim_start().starts_with("match ") || before.contains(" match ")
}

/// Whether `line` constructs a `tonic::Status` directly (`Status::new(…)`,
/// `Status::internal(…)`, `Status::invalid_argument(…)`, …). `Status::from(err)` is the
/// one conversion and is allowed.
fn builds_a_status(line: &str) -> bool {
    line.match_indices("Status::").any(|(at, _)| {
        let before = line[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return false; // `ServingStatus::`, `RequestStatus::`, …
        }
        let constructor: String = line[at + "Status::".len()..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        !constructor.is_empty()
            && constructor != "from"
            && line[at + "Status::".len() + constructor.len()..].starts_with('(')
    })
}

/// The lines of a Rust file that are product code, numbered from 1: comments blanked,
/// `#[cfg(test)]` items dropped. String literals are kept (the rules look at them).
fn product_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut skipping_above: Option<i64> = None;
    let mut pending_cfg_test = false;
    for (index, line) in lex(text).into_iter().enumerate() {
        if let Some(level) = skipping_above {
            if line.depth_end <= level {
                skipping_above = None;
            }
            continue;
        }
        let mut code = line.code.trim();
        if let Some(rest) = code.strip_prefix("#[cfg(test)]") {
            pending_cfg_test = true;
            code = rest.trim();
            if code.is_empty() {
                continue;
            }
        }
        if pending_cfg_test {
            if line.depth_end > line.depth_start || code.contains('{') {
                pending_cfg_test = false;
                if line.depth_end > line.depth_start {
                    skipping_above = Some(line.depth_start);
                }
            } else if code.ends_with(';') {
                pending_cfg_test = false;
            }
            continue;
        }
        lines.push((index + 1, line.code));
    }
    lines
}

/// One line of source: its code (comments replaced by spaces) and the brace depth
/// before and after it, counted outside string, char and comment text.
struct Line {
    code: String,
    depth_start: i64,
    depth_end: i64,
}

/// Splits Rust source into [`Line`]s with a small lexer: line and nested block comments,
/// strings (escapes, raw strings with hashes, spanning lines), char literals versus
/// lifetimes.
fn lex(text: &str) -> Vec<Line> {
    let chars: Vec<char> = text.chars().collect();
    let mut lines = Vec::new();
    let mut code = String::new();
    let (mut depth, mut depth_start) = (0i64, 0i64);
    let mut i = 0;
    let mut end_line = |code: &mut String, depth: i64, depth_start: &mut i64| {
        lines.push(Line {
            code: std::mem::take(code),
            depth_start: *depth_start,
            depth_end: depth,
        });
        *depth_start = depth;
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        match (c, next) {
            ('\n', _) => {
                end_line(&mut code, depth, &mut depth_start);
                i += 1;
            }
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                let mut nesting = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        nesting += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        nesting -= 1;
                        i += 2;
                        if nesting == 0 {
                            break;
                        }
                    } else {
                        if chars[i] == '\n' {
                            end_line(&mut code, depth, &mut depth_start);
                        }
                        i += 1;
                    }
                }
            }
            ('r', Some('"' | '#')) if !ident_before => {
                let hashes = chars[i + 1..].iter().take_while(|h| **h == '#').count();
                if chars.get(i + 1 + hashes) != Some(&'"') {
                    code.push(c);
                    i += 1;
                    continue;
                }
                let closing: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                code.extend(&chars[i..i + 2 + hashes]);
                i += 2 + hashes;
                while i < chars.len() && !chars[i..].starts_with(&closing) {
                    if chars[i] == '\n' {
                        end_line(&mut code, depth, &mut depth_start);
                    } else {
                        code.push(chars[i]);
                    }
                    i += 1;
                }
                code.extend(closing.iter().take(chars.len().saturating_sub(i)));
                i += closing.len();
            }
            ('"', _) => {
                code.push(c);
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    match chars[i] {
                        '\n' => end_line(&mut code, depth, &mut depth_start),
                        '\\' => {
                            code.push('\\');
                            i += 1;
                            match chars.get(i) {
                                Some('\n') => end_line(&mut code, depth, &mut depth_start),
                                Some(escaped) => code.push(*escaped),
                                None => {}
                            }
                        }
                        other => code.push(other),
                    }
                    i += 1;
                }
                code.push('"');
                i += 1;
            }
            ('\'', _) => {
                // A char literal ('{', '\''), copied whole; otherwise a lifetime.
                let end = if next == Some('\\') {
                    chars[i + 2..]
                        .iter()
                        .position(|d| *d == '\'')
                        .map(|p| i + 2 + p + usize::from(p == 0))
                } else if chars.get(i + 2) == Some(&'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match end {
                    Some(end) => {
                        code.extend(&chars[i..=end.min(chars.len() - 1)]);
                        i = end + 1;
                    }
                    None => {
                        code.push(c);
                        i += 1;
                    }
                }
            }
            ('{', _) => {
                depth += 1;
                code.push(c);
                i += 1;
            }
            ('}', _) => {
                depth -= 1;
                code.push(c);
                i += 1;
            }
            _ => {
                code.push(c);
                i += 1;
            }
        }
    }
    end_line(&mut code, depth, &mut depth_start);
    lines
}

/// Lines with method-chain continuations (`.split(…)` on the next line, as rustfmt
/// writes long chains) joined to the line they continue, numbered by their first line.
fn statements(lines: Vec<(usize, String)>) -> Vec<(usize, String)> {
    let mut joined: Vec<(usize, String)> = Vec::new();
    for (number, line) in lines {
        let trimmed = line.trim();
        match joined.last_mut() {
            Some((_, previous)) if trimmed.starts_with('.') && !trimmed.starts_with("..") => {
                previous.push_str(trimmed);
            }
            _ => joined.push((number, line)),
        }
    }
    joined
}

/// Every offence in one file's text, as `path:line: rule: code`.
fn offences(path: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (number, line) in statements(product_lines(text)) {
        for rule in RULES {
            if (rule.applies_to)(path) && (rule.offends)(&line) {
                found.push(format!("{path}:{number}: {}: {}", rule.name, line.trim()));
            }
        }
    }
    found
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if !matches!(name, "tests" | "target" | "benches") {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn libs_and_services_keep_the_rules() {
    let root = workspace_root();
    let mut files = Vec::new();
    for top in ["libs", "services", "examples"] {
        rust_files(&root.join(top), &mut files);
    }
    assert!(files.len() > 50, "only {} files found", files.len());
    let mut found = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if TEST_CODE.iter().any(|exempt| relative.starts_with(exempt)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        found.extend(offences(&relative, &text));
    }
    assert!(found.is_empty(), "\n{}\n", found.join("\n"));
}

#[test]
fn planted_message_comparisons_are_caught_with_file_and_line() {
    let planted = r#"//! A module.
fn mismatch(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::FailedPrecondition
        && status.message() == "public key mismatch"
}
fn retry(err: &ApiError) -> Option<u64> {
    err
        .message
        .split("retry after ").nth(1)?.parse().ok()
}
fn slug(err: &ApiError) -> &str {
    let slug = match err.message.as_str() {
        "This signing request has expired" => "expired",
        _ => "",
    };
    slug
}
fn reversed(status: &Status) -> bool {
    "gone" == status.message()
}
fn prefix(message: &str) -> bool {
    message == "invalid JSON: "
}
fn displayed(e: &Error) -> bool {
    e.to_string().starts_with("invalid JSON")
}
impl ApiError {
    fn status(&self) -> u16 {
        if !self.message.starts_with("invalid JSON: ") { 422 } else { 400 }
    }
}
"#;
    let found = offences("services/x/src/lib.rs", planted);
    let lines: Vec<&str> = found.iter().map(|f| f.split(':').nth(1).unwrap()).collect();
    assert_eq!(
        lines,
        ["4", "7", "12", "19", "22", "25", "29"],
        "{found:#?}"
    );
    assert!(found[0].starts_with("services/x/src/lib.rs:4: decides on an error message"));
}

#[test]
fn planted_status_constructions_are_caught_in_services_only() {
    let planted = "fn handler() -> Result<(), Status> {\n\
                   \x20   let _ = ServingStatus::Serving;\n\
                   \x20   Err(Status::internal(\"boom\"))?;\n\
                   \x20   Err(tonic::Status::new(tonic::Code::NotFound, \"gone\"))?;\n\
                   \x20   Err(Status::from(err))\n\
                   }\n";
    let found = offences("services/ledger/src/api.rs", planted);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("services/ledger/src/api.rs:3: builds a tonic::Status"));
    assert!(found[1].starts_with("services/ledger/src/api.rs:4: "));
    assert!(offences("libs/runtime/src/client.rs", planted).is_empty());
}

#[test]
fn planted_sha256_ids_are_caught_outside_content_id() {
    let planted = "fn id(hex: &str) -> String {\n    format!(\"sha256:{hex}\")\n}\n";
    let found = offences("services/ledger/src/ledger.rs", planted);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("services/ledger/src/ledger.rs:2: writes a sha256: id"));
    assert!(offences("libs/core/src/content_id.rs", planted).is_empty());
    // The forms that escaped the first version of this rule: the format string on its own
    // line (as rustfmt wraps a long call), and the bare prefix stripped or glued on.
    let planted = "fn id(record: &[u8]) -> String {\n    format!(\n        \"sha256:{}\",\n        \
                   sha256_hex(record)\n    )\n}\n\
                   fn bare(value: &str) -> &str {\n    value.strip_prefix(\"sha256:\").unwrap_or(value)\n}\n\
                   fn glued(hex: &str) -> String {\n    [\"sha256:\", hex].concat()\n}\n";
    let found = offences("services/continuity/src/domain/memory.rs", planted);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "services/continuity/src/domain/memory.rs:3",
            "services/continuity/src/domain/memory.rs:8",
            "services/continuity/src/domain/memory.rs:11"
        ],
        "{found:#?}"
    );
    // Prose that names the form in a message is not an id.
    let prose = "const HINT: &str = \"expected \\\"sha256:\\\" and 64 hex digits\";\n";
    assert!(offences("services/world/src/domain/hash.rs", prose).is_empty());
}

#[test]
fn planted_timestamp_formats_are_caught_outside_noema_core() {
    let planted = "fn stamp(at: OffsetDateTime) -> String {\n    \
                   at.format(&Rfc3339).unwrap_or_default()\n}\n\
                   fn day(at: OffsetDateTime) -> String {\n    at\n        \
                   .format(format_description!(\"[year]/[month]/[day]\"))\n        \
                   .unwrap_or_default()\n}\n\
                   fn now() -> String {\n    OffsetDateTime::now_utc()\n        \
                   .format(&time::format_description::well_known::Rfc3339)\n        \
                   .unwrap_or_default()\n}\n";
    let found = offences("services/world/src/ops/anchor.rs", planted);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "services/world/src/ops/anchor.rs:2",
            "services/world/src/ops/anchor.rs:5",
            "services/world/src/ops/anchor.rs:10"
        ],
        "{found:#?}"
    );
    assert!(offences("libs/core/src/time.rs", planted).is_empty());
    // Parsing, and formatting through noema_core::time, are not offences.
    let lawful = "fn read(text: &str) -> Option<OffsetDateTime> {\n    \
                  OffsetDateTime::parse(text, &Rfc3339).ok()\n}\n\
                  fn stamp(at: OffsetDateTime) -> String {\n    noema_core::time::rfc3339(at)\n}\n";
    assert!(offences("services/world/src/api.rs", lawful).is_empty());
}

#[test]
fn tests_comments_and_lawful_uses_are_not_offences() {
    let lawful = r#"
/// Never write `status.message() == "x"`: decide on the reason.
fn decide(status: &tonic::Status) -> bool {
    // A comment saying err.message == "x" is not code.
    let failure = Failure::from_status(status);
    let text = status.message().to_owned(); /* status.message() == "y" */
    request.message != local_cid && failure.message.is_empty() && text.len() > 1
}
const BRACE: char = '{';
#[cfg(test)]
mod tests {
    fn t(status: &tonic::Status) {
        assert_eq!(status.message(), "x");
        assert!(status.message() == "y");
        let s = "}";
    }
}
fn after_tests(err: &Err) -> bool {
    err.message == "caught after the test module"
}
"#;
    let found = offences("services/x/src/lib.rs", lawful);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with("services/x/src/lib.rs:19:"),
        "{found:#?}"
    );
}
