//! The control plane's modules import downward: no two of them reach each other, directly or
//! through others (ARCHITECTURE.md, "The layers of the control plane"). Read from the source
//! text: every path a module names through `crate::`, `super::`, `self::`, a module it declares
//! or a module it imported (`use crate::strategy::{self}` then `strategy::core::...`), resolved
//! to the deepest module it reaches.
//!
//! A folder's `mod.rs` and its files are one piece: the `mod.rs` may use its files and they its
//! helpers, so a module's edges to its own ancestors and descendants do not count. Only the code
//! a file ships counts: comments and its `#[cfg(test)]` module are left out, since a test may use
//! whatever builds what it checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One module of the crate: its path (`strategy::core`; the crate root is not one) and its
/// shipped code.
struct Module {
    path: String,
    file: PathBuf,
    code: String,
}

/// Where a module names another: the file and line.
type Edges = BTreeMap<String, BTreeMap<String, String>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module under `src/` but the crate root and the binaries, in path order.
fn modules() -> Vec<Module> {
    let root = src();
    let mut out = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()));
        for entry in entries {
            let file = entry.expect("a directory entry").path();
            if file.is_dir() {
                if file != root.join("bin") {
                    pending.push(file);
                }
                continue;
            }
            if file.extension().is_none_or(|ext| ext != "rs") || file == root.join("lib.rs") {
                continue;
            }
            let relative = file.strip_prefix(&root).expect("under src");
            let mut parts: Vec<String> = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|last| last == "mod") {
                parts.pop();
            }
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|err| panic!("cannot read {}: {err}", file.display()));
            out.push(Module {
                path: parts.join("::"),
                file,
                code: shipped(&text),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The code of a file up to its `#[cfg(test)]` module, without comments (lines kept, so
/// positions still give line numbers).
fn shipped(text: &str) -> String {
    text.lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .map(without_comment)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` without a `//` comment (one outside a string literal).
fn without_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            '/' if !in_string && previous == '/' => return &line[..at - 1],
            _ => {}
        }
        previous = c;
    }
    line
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn skip_space(s: &[u8], at: &mut usize) {
    while s.get(*at).is_some_and(u8::is_ascii_whitespace) {
        *at += 1;
    }
}

/// The identifier (or `*`) at `at`, moving past it.
fn ident(s: &[u8], at: &mut usize) -> Option<String> {
    let start = *at;
    if s.get(*at) == Some(&b'*') {
        *at += 1;
    } else {
        while s.get(*at).copied().is_some_and(is_ident) {
            *at += 1;
        }
    }
    (*at > start).then(|| String::from_utf8_lossy(&s[start..*at]).into_owned())
}

/// The paths a path or use tree starting at `at` names (`a::{b, c::{self, D}}` names `a::b`,
/// `a::c::self` and `a::c::D`), each with the name it is imported as when it says `as`.
fn tree(s: &[u8], at: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let mut segments = prefix.to_vec();
    loop {
        skip_space(s, at);
        if s.get(*at) == Some(&b'{') {
            *at += 1;
            loop {
                skip_space(s, at);
                if s.get(*at) == Some(&b'}') {
                    *at += 1;
                    return;
                }
                tree(s, at, &segments, out);
                skip_space(s, at);
                match s.get(*at) {
                    Some(b',') => *at += 1,
                    Some(b'}') => {
                        *at += 1;
                        return;
                    }
                    _ => return,
                }
            }
        }
        let Some(name) = ident(s, at) else { break };
        segments.push(name);
        skip_space(s, at);
        if s[*at..].starts_with(b"::") {
            *at += 2;
        } else {
            break;
        }
    }
    let mut alias_at = *at;
    skip_space(s, &mut alias_at);
    let alias = if s[alias_at..].starts_with(b"as ") {
        alias_at += 3;
        skip_space(s, &mut alias_at);
        ident(s, &mut alias_at)
    } else {
        None
    };
    let name = alias.unwrap_or_else(|| {
        let mut names = segments.iter().rev().filter(|s| *s != "self");
        names.next().cloned().unwrap_or_default()
    });
    out.push((segments, name));
}

/// The module path `segments` spell when named from `module` (`super::core::X` from
/// `strategy::apps` is `strategy::core::X`), with `bound` the names the module has for others.
/// None when they start elsewhere (`std::`, a local name).
fn spelled(module: &str, segments: &[String], bound: &BTreeMap<String, String>) -> Option<String> {
    let own: Vec<&str> = module.split("::").collect();
    let (mut full, rest): (Vec<&str>, &[String]) = match segments.first()?.as_str() {
        "crate" => (Vec::new(), &segments[1..]),
        "self" => (own, &segments[1..]),
        "super" => {
            let mut base = own;
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            (base, rest)
        }
        name => (bound.get(name)?.split("::").collect(), &segments[1..]),
    };
    full.extend(
        rest.iter()
            .map(String::as_str)
            .filter(|s| !matches!(*s, "self" | "*")),
    );
    Some(full.join("::"))
}

/// The deepest module of `known` that `path` is in or names; None for the crate root.
fn deepest(path: &str, known: &BTreeSet<String>) -> Option<String> {
    let mut at = path;
    loop {
        if known.contains(at) {
            return Some(at.to_string());
        }
        at = &at[..at.rfind("::")?];
    }
}

/// The modules `module` names in `code`, each with the first line that names it.
fn references(module: &str, code: &str, known: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let s = code.as_bytes();
    // The modules it declares are named from it by their own names.
    let mut bound: BTreeMap<String, String> = known
        .iter()
        .filter_map(|other| {
            let child = other.strip_prefix(module)?.strip_prefix("::")?;
            (!child.contains("::")).then(|| (child.to_string(), other.clone()))
        })
        .collect();
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(code.match_indices('\n').map(|(at, _)| at + 1))
        .collect();
    let mut found = BTreeMap::new();
    // A module imported by name (`use crate::strategy;`) may name further modules: read again
    // until nothing new is bound.
    loop {
        let before = bound.len();
        let mut at = 0;
        while at < s.len() {
            let starts = s[at].is_ascii_alphabetic()
                && (at == 0 || !(is_ident(s[at - 1]) || s[at - 1] == b':'));
            if !starts {
                at += 1;
                continue;
            }
            let start = at;
            let word = ident(s, &mut at).unwrap_or_default();
            let mut after = at;
            skip_space(s, &mut after);
            let is_path = s[after..].starts_with(b"::")
                && (matches!(word.as_str(), "crate" | "super" | "self")
                    || bound.contains_key(&word));
            if !is_path {
                continue;
            }
            let mut paths = Vec::new();
            tree(s, &mut start.clone(), &[], &mut paths);
            let line = line_starts.partition_point(|&l| l <= start);
            for (segments, name) in paths {
                let Some(path) = spelled(module, &segments, &bound) else {
                    continue;
                };
                let Some(target) = deepest(&path, known) else {
                    continue;
                };
                if target == path && segments.last().is_some_and(|s| s != "*") {
                    bound.entry(name).or_insert_with(|| target.clone());
                }
                if target != module {
                    found.entry(target).or_insert(line);
                }
            }
        }
        if bound.len() == before {
            return found;
        }
    }
}

/// Whether `a` is `b`'s ancestor or descendant (`strategy` and `strategy::core`).
fn nested(a: &str, b: &str) -> bool {
    let under = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with("::"))
    };
    under(a, b) || under(b, a)
}

/// Each module's references to the others it counts for, with where it makes them.
fn edges(modules: &[Module]) -> Edges {
    let known: BTreeSet<String> = modules.iter().map(|m| m.path.clone()).collect();
    let root = src();
    modules
        .iter()
        .map(|m| {
            let file = m.file.strip_prefix(&root).unwrap_or(&m.file).display();
            let refs = references(&m.path, &m.code, &known)
                .into_iter()
                .filter(|(target, _)| !nested(&m.path, target))
                .map(|(target, line)| (target, format!("src/{file}:{line}")))
                .collect();
            (m.path.clone(), refs)
        })
        .collect()
}

/// One circle through `start` within `members`, as the modules in order, `start` first.
fn circle(edges: &Edges, members: &BTreeSet<String>, start: &str) -> Vec<String> {
    let mut came_from: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.to_string()]);
    while let Some(at) = queue.pop_front() {
        for next in edges[&at].keys().filter(|n| members.contains(*n)) {
            if next == start {
                let mut path = vec![at.clone()];
                while let Some(previous) = came_from.get(path.last().expect("not empty")) {
                    path.push(previous.clone());
                }
                path.reverse();
                return path;
            }
            if !came_from.contains_key(next) && next != start {
                came_from.insert(next.clone(), at.clone());
                queue.push_back(next.clone());
            }
        }
    }
    vec![start.to_string()]
}

/// The groups of modules that reach each other (strongly connected, more than one module).
fn circles(edges: &Edges) -> Vec<BTreeSet<String>> {
    // Two modules are in one group when each reaches the other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::from([from.to_string()]);
        let mut pending = vec![from.to_string()];
        while let Some(at) = pending.pop() {
            for next in edges[&at].keys() {
                if seen.insert(next.clone()) {
                    pending.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|m| (m, reach(m))).collect();
    let mut grouped = BTreeSet::new();
    let mut out = Vec::new();
    for (m, from_m) in &reached {
        if grouped.contains(*m) {
            continue;
        }
        let group: BTreeSet<String> = from_m
            .iter()
            .filter(|other| reached[other].contains(*m))
            .cloned()
            .collect();
        grouped.extend(group.iter().cloned());
        if group.len() > 1 {
            out.push(group);
        }
    }
    out
}

#[test]
fn the_control_planes_modules_import_without_circles() {
    let modules = modules();
    assert!(
        modules.iter().any(|m| m.path == "api") && modules.iter().any(|m| m.path == "storage"),
        "the control plane's modules were not found under {}",
        src().display()
    );
    let edges = edges(&modules);
    let found: Vec<String> = circles(&edges)
        .iter()
        .map(|group| {
            let first = group.first().expect("a group has members");
            let path = circle(&edges, group, first);
            let steps: Vec<String> = path
                .iter()
                .zip(path.iter().cycle().skip(1))
                .map(|(from, to)| format!("  {from} -> {to} ({})", edges[from][to]))
                .collect();
            format!(
                "{} reach each other:\n{}",
                group.iter().cloned().collect::<Vec<_>>().join(", "),
                steps.join("\n")
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "the control plane's modules must import downward (ARCHITECTURE.md): move what both \
         sides need into a lower module, or pass it in\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_sees_every_way_a_module_is_named() {
    let known: BTreeSet<String> = [
        "api",
        "objects",
        "registry",
        "resource",
        "strategy",
        "strategy::apps",
        "strategy::core",
        "table",
        "table::docs",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let code = shipped(
        "use super::core::default_claim;\n\
         use crate::resource::{Part, ResourceInfo};\n\
         use crate::{objects, table::{self, IncludeObject}};\n\
         // crate::api::ApiServer in a comment\n\
         fn f() { table::docs::doc(\"\"); }\n\
         #[cfg(test)]\n\
         mod tests { use crate::registry::Registry; }",
    );
    let refs = references("strategy::apps", &code, &known);
    assert_eq!(
        refs.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "objects",
            "resource",
            "strategy::core",
            "table",
            "table::docs"
        ]
    );
    assert_eq!(refs["table::docs"], 5);
    // A module named through one it imported.
    let code = "use crate::strategy;\nstatic S: &dyn X = { use strategy::{core}; &core::C };";
    assert_eq!(
        references("registry", code, &known)
            .keys()
            .collect::<Vec<_>>(),
        ["strategy", "strategy::core"]
    );
    // A folder and its files are one piece.
    assert!(nested("strategy", "strategy::core") && nested("strategy::core", "strategy"));
    assert!(!nested("strategy", "strategy_x") && !nested("table", "strategy::core"));
}
