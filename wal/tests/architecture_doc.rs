//! docs/ARCHITECTURE.md maps each invariant to the code that keeps it and
//! the tests that check it (§7), and each module to its key items (§1).
//! This test reads both tables and fails when a name in them does not exist
//! in the workspace's sources, so a renamed or deleted function or test
//! cannot leave the document pointing at nothing. It also fails on a doc
//! that points outside the repository.
//!
//! How a name is resolved (the doc's own conventions):
//! - `file.rs:` or a path `crate/tests/x.rs` sets the file the following
//!   names live in; `engine:` (a test file's stem, `crash` = `crash_steps`)
//!   does the same for tests; `stem::name` names `name` in a file `stem.rs`.
//! - In the "Checked by" column, a lowercase name with a file is a test or
//!   helper: `fn name` must be in that file (globs `*` and `{a,b}` must
//!   match at least one `fn`).
//! - Every other identifier (types, variants, fields, methods in `Type::m`
//!   or `Type::{a,b}`) must be defined somewhere in the workspace (`fn`,
//!   `struct`, `enum`, `trait`, `type`, `const`, `static`, `mod`, a field or
//!   a variant) and, when a file is named, occur in that file.
//! - Backticked text that is not an identifier (expressions, file contents,
//!   `u64::MAX`) is not checked.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Crates and folders whose `.rs` files the doc may name.
const SOURCE_ROOTS: &[&str] = &[
    "wal",
    "simfs",
    "sim-tests",
    "wal-model",
    "wal-fuzz",
    "wal-shuttle",
    "bench",
    "fuzz/fuzz_targets",
];

/// Names from outside the workspace that the doc may use in backticks.
const EXTERNAL: &[&str] = &[
    "u64",
    "u32",
    "u128",
    "usize",
    "Option",
    "Result",
    "Ok",
    "Err",
    "Some",
    "None",
    "Vec",
    "Arc",
    "Mutex",
    "Duration",
    "std",
    "futures",
    "tokio",
    "madsim",
    "shuttle",
    "Drop",
    "Debug",
    "Display",
    "Clone",
    "Send",
    "Sync",
    "WouldBlock",
    "NotFound",
    "AlreadyExists",
    "MAX",
    "pread",
    "pwrite",
    "flock",
    "debug_assert",
    "assert",
];

struct Sources {
    /// Every source file: path relative to the workspace, and its text.
    files: Vec<(String, String)>,
    /// File stem → indices into `files`.
    by_stem: BTreeMap<String, Vec<usize>>,
    /// Every defined name (see [`defined_names`]).
    defined: std::collections::BTreeSet<String>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Names a line defines: `fn x`, `struct X`, …, a field `x:` or a variant.
fn defined_names(text: &str, out: &mut std::collections::BTreeSet<String>) {
    const KEYWORDS: &[&str] = &[
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "const",
        "static",
        "mod",
        "macro_rules!",
    ];
    for line in text.lines() {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            if KEYWORDS.contains(&pair[0]) {
                out.insert(pair[1].trim_end_matches('!').to_string());
            }
        }
        // A field (`pub x: T,` / `x: T,`) or a variant (`X,` `X(..)` `X { .. }`).
        let t = line
            .trim_start()
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        let ident: String = t.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !ident.is_empty() {
            let rest = t[ident.len()..].trim_start();
            if rest.starts_with(':') && !rest.starts_with("::")
                || rest.starts_with(',')
                || rest.starts_with('(')
                || rest.starts_with('{')
                || rest.is_empty() && ident.chars().next().is_some_and(char::is_uppercase)
            {
                out.insert(ident);
            }
        }
    }
}

impl Sources {
    fn load() -> Sources {
        let root = workspace();
        let mut paths = Vec::new();
        for r in SOURCE_ROOTS {
            collect_rs(&root.join(r), &mut paths);
        }
        paths.sort();
        let mut files = Vec::new();
        let mut by_stem: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut defined = std::collections::BTreeSet::new();
        for p in paths {
            let text = fs::read_to_string(&p).expect("read source");
            defined_names(&text, &mut defined);
            let rel = p.strip_prefix(&root).expect("inside").to_string_lossy().into_owned();
            let stem = p.file_stem().expect("stem").to_string_lossy().into_owned();
            by_stem.entry(stem).or_default().push(files.len());
            files.push((rel, text));
        }
        Sources {
            files,
            by_stem,
            defined,
        }
    }

    /// The files a context token names: a path, `x.rs`, or a stem.
    fn resolve(&self, token: &str, tests: bool) -> Option<Vec<usize>> {
        if token.contains('/') {
            let t = token.trim_end_matches('/');
            let hits: Vec<usize> = (0..self.files.len())
                .filter(|&i| self.files[i].0 == t || self.files[i].0.starts_with(&format!("{t}/")))
                .collect();
            return (!hits.is_empty()).then_some(hits);
        }
        let (stem, src_only) = match token.strip_suffix(".rs") {
            Some(s) => (s, true),
            None => (if token == "crash" { "crash_steps" } else { token }, false),
        };
        let all = self.by_stem.get(stem)?;
        // `x.rs` is a source file; a bare stem in the tests column is a test
        // file when there is one.
        let pick: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| {
                let in_tests = self.files[i].0.contains("/tests/");
                if src_only {
                    !in_tests
                } else {
                    !tests || in_tests
                }
            })
            .collect();
        Some(if pick.is_empty() { all.clone() } else { pick })
    }

    fn has_fn(&self, files: &[usize], pattern: &str) -> bool {
        files.iter().any(|&i| {
            self.files[i].1.lines().any(|l| {
                let Some(at) = l.find("fn ") else { return false };
                let name: String = l[at + 3..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                glob(pattern, &name)
            })
        })
    }

    fn mentions(&self, files: &[usize], word: &str) -> bool {
        files.iter().any(|&i| contains_word(&self.files[i].1, word))
    }
}

fn contains_word(text: &str, word: &str) -> bool {
    let is_id = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_id) && !after.is_some_and(is_id)
    })
}

/// `*` matches any run of identifier characters.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => name.starts_with(head) && (head.len()..=name.len()).any(|k| glob(tail, &name[k..])),
    }
}

/// `{a,b}_x` → `a_x`, `b_x`.
fn expand(token: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (token.find('{'), token.find('}')) else {
        return vec![token.to_string()];
    };
    if close < open {
        return vec![token.to_string()];
    }
    token[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "...")
        .flat_map(|a| expand(&format!("{}{}{}", &token[..open], a, &token[close + 1..])))
        .collect()
}

fn is_identifier_path(token: &str) -> bool {
    !token.is_empty()
        && token
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '{' || c == '*')
        && token.chars().all(|c| c.is_alphanumeric() || "_:{},*.".contains(c))
        && !token.contains("..")
        && !token.ends_with(':')
        && !token.contains('.')
}

/// Backticked tokens of a cell with the text that follows each.
fn backticked(cell: &str) -> Vec<(String, String)> {
    let parts: Vec<&str> = cell.split('`').collect();
    (1..parts.len())
        .step_by(2)
        .map(|k| {
            (
                parts[k].to_string(),
                parts.get(k + 1).copied().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Cells of a markdown table row (no `|` inside backticks in these tables).
fn cells(row: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_tick = false;
    for c in row.trim().trim_matches('|').chars() {
        match c {
            '`' => {
                in_tick = !in_tick;
                cur.push(c);
            }
            '|' if !in_tick => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// A backticked token with the text after it and its parenthesis depth.
struct Token {
    text: String,
    after: String,
    depth: usize,
    /// Whether a `;` or a sentence end at this depth came before it since
    /// the previous token (the context of this depth ends there).
    break_before: bool,
}

fn tokens(cell: &str) -> Vec<Token> {
    let parts: Vec<&str> = cell.split('`').collect();
    let mut out = Vec::new();
    // breaks[d]: a `;` or sentence end at depth d since the last token.
    let mut breaks = vec![false];
    for (k, part) in parts.iter().enumerate() {
        let depth = breaks.len() - 1;
        if k % 2 == 1 {
            let after = parts.get(k + 1).copied().unwrap_or("").to_string();
            out.push(Token {
                text: part.to_string(),
                after,
                depth,
                break_before: breaks[depth],
            });
            breaks[depth] = false;
            continue;
        }
        let mut chars = part.chars().peekable();
        while let Some(c) = chars.next() {
            let d = breaks.len() - 1;
            match c {
                '(' => breaks.push(true),
                ')' if d > 0 => {
                    breaks.pop();
                }
                ';' => breaks[d] = true,
                '.' if chars.peek().is_some_and(|n| n.is_whitespace()) => breaks[d] = true,
                _ => {}
            }
        }
    }
    out
}

/// Checks one cell; `tests` for the "Checked by" column. Returns problems.
///
/// A file named at some parenthesis depth is the context of the names that
/// follow it at that depth, up to a `;`, a sentence end or the closing
/// parenthesis: those names must be in that file. Names with no context
/// (descriptions in parentheses, prose) must be defined somewhere.
fn check_cell(src: &Sources, row: &str, cell: &str, tests: bool, outer: Option<Vec<usize>>) -> Vec<String> {
    let mut problems = Vec::new();
    // context[d]: the file(s) named at depth d, if any.
    let mut context: Vec<Option<Vec<usize>>> = vec![outer.clone()];
    for t in tokens(cell) {
        context.resize(t.depth + 1, None);
        context.truncate(t.depth + 1);
        if t.break_before {
            context[t.depth] = if t.depth == 0 { outer.clone() } else { None };
        }
        let token = t.text.as_str();
        let colon = t.after.trim_start().starts_with(':') && !t.after.trim_start().starts_with("::");
        if token.contains('/')
            || token.ends_with(".rs")
            || colon && (src.by_stem.contains_key(token) || token == "crash")
        {
            match src.resolve(token, tests) {
                Some(files) => context[t.depth] = Some(files),
                None if workspace().join(token).exists() => context[t.depth] = None,
                None if token.contains('/') || token.ends_with(".rs") => {
                    problems.push(format!("{row}: `{token}` is not a file of the workspace"));
                }
                None => {}
            }
            continue;
        }
        if token == "sim-tests" {
            context[t.depth] = src.resolve("sim-tests/", tests);
            continue;
        }
        if !is_identifier_path(token) || token.len() == 1 {
            continue;
        }
        let ctx = context[t.depth].as_deref();
        for name in expand(token) {
            problems.extend(check_name(src, row, &name, tests, ctx));
        }
    }
    problems
}

fn check_name(src: &Sources, row: &str, name: &str, tests: bool, context: Option<&[usize]>) -> Vec<String> {
    let segs: Vec<&str> = name.split("::").filter(|s| !s.is_empty()).collect();
    let (Some(first), Some(last)) = (segs.first(), segs.last()) else {
        return Vec::new();
    };
    if EXTERNAL.contains(first) || EXTERNAL.contains(last) || *last == "..." {
        return Vec::new();
    }
    // `stem::name` (a module path): the name lives in that file.
    let lowercase = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_lowercase() || c == '_' || c == '*')
    };
    let files: Option<Vec<usize>> = if segs.len() > 1 && lowercase(first) {
        match src.resolve(first, tests) {
            Some(f) => Some(f),
            None => return vec![format!("{row}: `{name}`: no file `{first}.rs`")],
        }
    } else {
        context.map(<[usize]>::to_vec)
    };
    let is_test_name = tests && lowercase(last) && (segs.len() == 1 || lowercase(segs[segs.len() - 2]));
    if is_test_name {
        if let Some(files) = &files {
            if !src.has_fn(files, last) {
                let where_ = files
                    .iter()
                    .map(|&i| src.files[i].0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                return vec![format!("{row}: test `{name}`: no `fn {last}` in {where_}")];
            }
            return Vec::new();
        }
    }
    let mut problems = Vec::new();
    for s in &segs {
        if s.contains('*') {
            let all: Vec<usize> = (0..src.files.len()).collect();
            if !src.has_fn(files.as_deref().unwrap_or(&all), s) {
                problems.push(format!("{row}: `{name}`: nothing matches `{s}`"));
            }
            continue;
        }
        if EXTERNAL.contains(s) || src.by_stem.contains_key(*s) && s == first {
            continue;
        }
        if !src.defined.contains(*s) {
            problems.push(format!("{row}: `{name}`: `{s}` is defined nowhere in the workspace"));
        }
    }
    if let Some(files) = &files {
        if !last.contains('*') && !src.mentions(files, last) && !EXTERNAL.contains(last) {
            let where_ = files
                .iter()
                .map(|&i| src.files[i].0.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            problems.push(format!("{row}: `{name}` does not occur in {where_}"));
        }
    }
    problems
}

fn architecture() -> String {
    fs::read_to_string(workspace().join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md")
}

/// The rows of the table that follows the heading starting with `heading`.
fn table_rows(doc: &str, heading: &str) -> Vec<String> {
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(heading)).skip(1);
    let mut rows = Vec::new();
    for l in lines.by_ref() {
        if l.starts_with('#') {
            break;
        }
        if l.starts_with('|') {
            rows.push(l.to_string());
        } else if !rows.is_empty() {
            break;
        }
    }
    rows.into_iter().skip(2).collect() // the header and the `|---|` line
}

#[test]
fn every_invariant_row_names_code_and_tests_that_exist() {
    let src = Sources::load();
    let rows = table_rows(&architecture(), "## 7. Invariants");
    assert!(rows.len() >= 29, "the invariant table has {} rows", rows.len());
    let mut problems = Vec::new();
    for (k, row) in rows.iter().enumerate() {
        let c = cells(row);
        assert_eq!(
            c.len(),
            5,
            "invariant row {} has {} cells, not 5: {row}",
            k + 1,
            c.len()
        );
        let number = c[0].trim();
        assert_eq!(number, (k + 1).to_string(), "invariant rows are numbered 1, 2, …");
        let label = format!("invariant {number}");
        problems.extend(check_cell(&src, &label, &c[2], false, None));
        problems.extend(check_cell(&src, &label, &c[3], true, None));
        problems.extend(check_cell(&src, &label, &c[4], true, None));
        // Every invariant is checked by a test that exists.
        let named_tests = backticked(&c[3]).iter().filter(|(t, _)| is_identifier_path(t)).count();
        if named_tests == 0 {
            problems.push(format!("{label}: the \"Checked by\" column names no test"));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/ARCHITECTURE.md §7 is out of date:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_module_row_names_items_that_exist() {
    let src = Sources::load();
    let rows = table_rows(&architecture(), "## 1. Modules");
    assert!(rows.len() >= 10, "the module table has {} rows", rows.len());
    let mut problems = Vec::new();
    for row in &rows {
        let c = cells(row);
        let Some((file, _)) = backticked(&c[0]).into_iter().next() else {
            continue;
        };
        let Some(files) = src.resolve(&file, false) else {
            problems.push(format!("module table: `{file}` is not in the workspace"));
            continue;
        };
        problems.extend(check_cell(&src, &format!("module `{file}`"), &c[2], false, Some(files)));
    }
    assert!(
        problems.is_empty(),
        "docs/ARCHITECTURE.md §1 is out of date:\n{}",
        problems.join("\n")
    );
}

#[test]
fn no_doc_points_outside_the_repository() {
    let root = workspace();
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.push(root.join("README.md"));
    let mut problems = Vec::new();
    for d in docs {
        let text = fs::read_to_string(&d).expect("read doc");
        for (n, line) in text.lines().enumerate() {
            if line.contains("../shared") {
                problems.push(format!("{}:{}: {line}", d.display(), n + 1));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs point outside the repository:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_catches_a_missing_test_and_a_missing_function() {
    // A test must be able to fail: a row naming things that do not exist.
    let src = Sources::load();
    let bad_test = check_cell(&src, "planted", "`engine`: `no_such_test_exists_here`", true, None);
    assert_eq!(bad_test.len(), 1, "{bad_test:?}");
    let bad_fn = check_cell(
        &src,
        "planted",
        "`group_commit.rs`: `Writer::{run_group,no_such_fn}`",
        false,
        None,
    );
    assert!(
        !bad_fn.is_empty() && bad_fn.iter().all(|p| p.contains("no_such_fn")),
        "{bad_fn:?}"
    );
    let bad_file = check_cell(&src, "planted", "`wal/tests/no_such_file.rs`", true, None);
    assert_eq!(bad_file.len(), 1, "{bad_file:?}");
    let good = check_cell(
        &src,
        "planted",
        "`engine`: `appenders_on_many_os_threads_keep_index_order`; `crash`: all four `*_at_every_step_*`",
        true,
        None,
    );
    assert!(good.is_empty(), "{good:?}");
}

#[test]
fn no_module_of_wal_src_uses_one_that_uses_it_back() {
    // The engine's files form a hierarchy: the API (wal.rs) on top, the
    // shared state (inner.rs) below the modules that operate on it. A cycle,
    // direct or through others, means two files that cannot be understood
    // apart.
    let dir = workspace().join("wal/src");
    let mut modules: BTreeMap<String, String> = BTreeMap::new();
    for e in fs::read_dir(&dir).expect("wal/src").flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_stem().expect("stem").to_string_lossy().into_owned();
            let text = fs::read_to_string(&p).expect("read");
            // Code only: comments and doc comments may name any module.
            let code: String = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            modules.insert(name, code);
        }
    }
    let deps: BTreeMap<String, std::collections::BTreeSet<String>> = modules
        .iter()
        .map(|(m, code)| {
            let mut used = std::collections::BTreeSet::new();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                    group.split('}').next().unwrap_or("").split(',').collect()
                } else {
                    vec![rest]
                };
                for n in names {
                    let n: String = n
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if modules.contains_key(&n) && &n != m {
                        used.insert(n);
                    }
                }
            }
            (m.clone(), used)
        })
        .collect();
    // A module reaches itself through its dependencies: a cycle.
    let mut cycles = Vec::new();
    for start in deps.keys() {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((m, path)) = stack.pop() {
            for d in &deps[&m] {
                if d == start {
                    cycles.push(format!("{} -> {start}", path.join(" -> ")));
                } else if seen.insert(d.clone()) {
                    let mut p = path.clone();
                    p.push(d.clone());
                    stack.push((d.clone(), p));
                }
            }
        }
    }
    assert!(deps.len() >= 15, "read {} modules", deps.len());
    assert!(
        deps["wal"].contains("inner"),
        "the reader sees wal.rs use inner.rs: {:?}",
        deps["wal"]
    );
    assert!(cycles.is_empty(), "import cycles in wal/src:\n{}", cycles.join("\n"));
}
