//! The shape of the source tree: the import graph between `src/`'s
//! top-level modules has no cycle, no file's non-test part passes 700
//! lines (the conductor, `session.rs`, 400), and no non-test function
//! passes 100 lines. Print the graph with
//! `cargo test --test integration layout:: -- --nocapture`.
//!
//! The reading relies on `cargo fmt`'s layout: an item's closing brace
//! sits alone at the item's own indentation.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const FILE_LIMIT: usize = 700;
const CONDUCTOR_LIMIT: usize = 400;
const FN_LIMIT: usize = 100;

/// One source file's non-test code.
struct Source {
    /// Relative to `src/`.
    path: String,
    /// The module path of the file (`["perf", "ring"]`); empty for the root.
    module: Vec<String>,
    /// Lines outside `#[cfg(test)]` items.
    lines: Vec<String>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The crate's non-test files, found from `lib.rs` through `mod` items.
fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    visit(&src_dir().join("lib.rs"), Vec::new(), true, &mut out);
    out
}

fn visit(file: &Path, module: Vec<String>, owns_dir: bool, out: &mut Vec<Source>) {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let lines = without_tests(&text);
    // A `mod x;` of `a/mod.rs` or `lib.rs` lives beside it; of `a/b.rs`, in `a/b/`.
    let dir = if owns_dir {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    for line in &lines {
        let Some(name) = mod_declaration(line) else {
            continue;
        };
        let mut child = module.clone();
        child.push(name.to_string());
        let flat = dir.join(format!("{name}.rs"));
        if flat.exists() {
            visit(&flat, child, false, out);
        } else {
            visit(&dir.join(name).join("mod.rs"), child, true, out);
        }
    }
    let path = file
        .strip_prefix(src_dir())
        .unwrap()
        .to_string_lossy()
        .into_owned();
    out.push(Source {
        path,
        module,
        lines,
    });
}

/// `mod name;` (with any visibility), the declaration of a file module.
fn mod_declaration(line: &str) -> Option<&str> {
    let t = line.trim();
    let rest = t.strip_suffix(';')?;
    let rest = rest
        .strip_prefix("pub(crate) ")
        .or_else(|| rest.strip_prefix("pub "))
        .unwrap_or(rest);
    let name = rest.strip_prefix("mod ")?;
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(name)
}

/// The lines of `text` with every `#[cfg(test)]` item (a `mod x;`, a
/// `mod x { … }`, a function, a `use`) removed.
fn without_tests(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test") {
            i = item_end(&lines, i + 1) + 1;
            continue;
        }
        out.push(line.to_string());
        i += 1;
    }
    out
}

/// The last line of the item that starts at or after line `from`
/// (skipping further attributes): its own line if it ends in `;`, else the
/// closing brace at its indentation.
fn item_end(lines: &[&str], mut from: usize) -> usize {
    while from < lines.len() && lines[from].trim_start().starts_with("#[") {
        from += 1;
    }
    let Some(first) = lines.get(from) else {
        return lines.len();
    };
    let indent = indent_of(first);
    let close = format!("{}}}", &first[..indent]);
    let close_statement = format!("{close};");
    let head = first.trim_end();
    if head.ends_with(';') || head.ends_with('}') {
        // `mod x;`, `use …;` or a one-line item.
        return from;
    }
    let opens_block = first.contains('{');
    for (j, line) in lines.iter().enumerate().skip(from + 1) {
        let t = line.trim_end();
        if t == close || line.starts_with(&close_statement) {
            return j;
        }
        if !opens_block && indent_of(line) == indent && t.ends_with(';') {
            // The end of a multi-line `use` or statement at this level.
            return j;
        }
    }
    lines.len() - 1
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The top-level modules that `source`'s code names, besides its own.
fn imports(source: &Source) -> BTreeSet<String> {
    let code: String = source
        .lines
        .iter()
        .map(|l| strip_strings(l))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        // `offwake_crate::` or `$crate::` are not paths of this crate.
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        first_segments(rest, &mut out);
    }
    // `super::…` that climbs to the crate root.
    let depth = source.module.len();
    if depth > 0 {
        let climb = "super::".repeat(depth);
        let mut rest = code.as_str();
        while let Some(at) = rest.find(&climb) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + climb.len()..];
            if before.is_some_and(|c| c == ':') {
                continue;
            }
            first_segments(rest, &mut out);
        }
    }
    if let Some(own) = source.module.first() {
        out.remove(own);
    }
    out
}

/// The first path segment after `crate::`: one identifier, or each of a
/// `{a::b, c}` group's.
fn first_segments(rest: &str, out: &mut BTreeSet<String>) {
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut item = String::new();
        let mut at_start = true;
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    at_start = true;
                    push_ident(&mut item, out);
                    continue;
                }
                _ => {}
            }
            if at_start && depth == 0 {
                if c.is_alphanumeric() || c == '_' {
                    item.push(c);
                } else if !item.is_empty() {
                    at_start = false;
                    push_ident(&mut item, out);
                }
            }
        }
        push_ident(&mut item, out);
    } else {
        let mut ident: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        push_ident(&mut ident, out);
    }
}

fn push_ident(item: &mut String, out: &mut BTreeSet<String>) {
    let name = std::mem::take(item);
    if !name.is_empty() && name != "self" && name.starts_with(|c: char| c.is_lowercase()) {
        out.insert(name);
    }
}

/// `line` without the insides of string literals and trailing comments.
fn strip_strings(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut escaped = false;
    let mut prev = ' ';
    for c in line.chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
                out.push(c);
            }
            continue;
        }
        if c == '/' && prev == '/' {
            out.pop();
            break;
        }
        if c == '"' {
            in_str = true;
        }
        out.push(c);
        prev = c;
    }
    out
}

/// The graph's strongly connected components of more than one module.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    // Two modules share a component when each reaches the other.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (m, r) in &reaches {
        if out.iter().any(|c| c.contains(*m)) {
            continue;
        }
        let comp: BTreeSet<String> = r
            .iter()
            .filter(|o| reaches.get(o).is_some_and(|back| back.contains(*m)))
            .cloned()
            .collect();
        if comp.len() > 1 {
            out.push(comp);
        }
    }
    out
}

/// Non-test functions over the limit: (file, line, name, length).
fn long_functions(source: &Source) -> Vec<(usize, String, usize)> {
    let mut out = Vec::new();
    let lines = &source.lines;
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        let indent = indent_of(line);
        let close = format!("{}}}", &line[..indent]);
        // A declaration without a body ends in `;` before any `{`.
        let mut end = None;
        for (j, l) in lines.iter().enumerate().skip(i) {
            let t = l.trim_end();
            if j == i && t.ends_with('}') && t.contains('{') {
                end = Some(j);
                break;
            }
            if indent_of(l) == indent && t.ends_with(';') && !t.contains('{') && j > i {
                break;
            }
            if j == i && t.ends_with(';') {
                break;
            }
            if j > i && t == close {
                end = Some(j);
                break;
            }
        }
        if let Some(end) = end {
            let len = end - i + 1;
            if len > FN_LIMIT {
                out.push((i, name, len));
            }
        }
    }
    out
}

fn fn_name(line: &str) -> Option<String> {
    let mut t = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        t = t.strip_prefix(prefix).unwrap_or(t);
    }
    let rest = t.strip_prefix("fn ")?;
    Some(
        rest.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect(),
    )
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in sources() {
        let Some(top) = source.module.first() else {
            continue;
        };
        graph
            .entry(top.clone())
            .or_default()
            .extend(imports(&source));
    }
    // Only edges to modules of the crate (not `crate::Foo` items).
    let tops: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| tops.contains(d));
    }
    graph
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = graph();
    println!(
        "{} top-level modules; each -> the modules it uses:",
        graph.len()
    );
    for (m, deps) in &graph {
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        println!("  {m} -> {}", deps.join(", "));
    }
    let cycles = cycles(&graph);
    for c in &cycles {
        let c: Vec<&str> = c.iter().map(String::as_str).collect();
        println!("cycle: {{{}}}", c.join(", "));
    }
    assert!(cycles.is_empty(), "import cycles: {cycles:?}");
}

#[test]
fn files_and_functions_are_short() {
    let mut faults = Vec::new();
    for source in sources() {
        let limit = if source.path == "session.rs" {
            CONDUCTOR_LIMIT
        } else {
            FILE_LIMIT
        };
        let n = source.lines.len();
        if n > limit {
            faults.push(format!(
                "{}: {n} non-test lines (limit {limit})",
                source.path
            ));
        }
        for (line, name, len) in long_functions(&source) {
            faults.push(format!(
                "{}: fn {name} (non-test line {}) has {len} lines (limit {FN_LIMIT})",
                source.path,
                line + 1
            ));
        }
    }
    for f in &faults {
        println!("{f}");
    }
    assert!(
        faults.is_empty(),
        "{} faults:\n{}",
        faults.len(),
        faults.join("\n")
    );
}

/// The reader itself: a cycle, a long file and a long function are found.
#[test]
fn the_reader_finds_what_it_looks_for() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".into()].into());
    g.insert("b".into(), ["c".into()].into());
    g.insert("c".into(), ["a".into()].into());
    g.insert("d".into(), ["a".into()].into());
    assert_eq!(cycles(&g), vec![["a", "b", "c"].map(String::from).into()]);

    let text = "use crate::{a::X, b};\nuse super::super::c::Y;\n#[cfg(test)]\nmod tests {\n    use crate::d;\n}\nfn f() {\n    crate::e::g();\n}\n";
    let source = Source {
        path: "x/y.rs".into(),
        module: vec!["x".into(), "y".into()],
        lines: without_tests(text),
    };
    let found: Vec<String> = imports(&source).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "e"]);

    let mut long = String::from("pub(crate) fn long(\n    x: u8,\n) {\n");
    long.push_str(&"    x;\n".repeat(FN_LIMIT));
    long.push_str("}\nfn short() {}\n");
    let source = Source {
        path: "z.rs".into(),
        module: vec!["z".into()],
        lines: without_tests(&long),
    };
    let found = long_functions(&source);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "long");
    assert_eq!(found[0].2, FN_LIMIT + 4);
}
