//! The docs say what fleetform does, and keep saying it: every relative link and anchor of
//! README.md, ARCHITECTURE.md and `docs/` resolves as a code host renders them; the RBAC table of
//! the install guide is the ClusterRole `fleetform install` writes; a default the hand-written
//! pages give in brackets is the one the schemas or the flags have; and the README stays short.
//! (The generated pages are kept current by the library's `docs_are_current`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serde_json::Value;

/// The page whose table lists the hub's RBAC.
const RBAC_PAGE: &str = "docs/install/rbac.md";
/// The pages generated from fleetform's definitions.
const GENERATED: [&str; 2] = ["docs/reference/cli.md", "docs/reference/fleet-repo.md"];
const README_MAX_LINES: usize = 300;
const MAX_LINE_CHARS: usize = 300;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, ARCHITECTURE.md and every Markdown page under docs/, relative to the root.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    let mut pending = vec![root().join("docs")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(relative(&path));
            }
        }
    }
    pages.sort();
    pages
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

fn read(page: &str) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|err| panic!("{page}: {err}"))
}

fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(text, Options::ENABLE_TABLES)
}

/// The anchors a code host gives a page's headings: the heading's text lowercased, anything
/// but letters, digits, spaces, `-` and `_` dropped, spaces made `-`; a repeated one gets `-1`,
/// `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in parser(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(text) | Event::Code(text) => {
                if let Some(heading) = &mut heading {
                    heading.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let slug: String = heading
                    .take()
                    .unwrap_or_default()
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect();
                let count = seen.entry(slug.clone()).or_default();
                anchors.insert(match *count {
                    0 => slug,
                    n => format!("{slug}-{n}"),
                });
                *count += 1;
            }
            _ => {}
        }
    }
    anchors
}

/// Every link and image target of a page.
fn links(text: &str) -> Vec<String> {
    parser(text)
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .collect()
}

/// `dir/../x` as `x`; `None` when it climbs out of the repository.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !normal.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    Some(normal)
}

/// Why a link of `page` does not resolve, or `None` when it does.
fn broken(page: &str, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        PathBuf::from(page)
    } else if let Some(absolute) = path.strip_prefix('/') {
        PathBuf::from(absolute)
    } else {
        match normalise(&Path::new(page).parent().unwrap().join(path)) {
            Some(file) => file,
            None => return Some(format!("{target}: leaves the repository")),
        }
    };
    let on_disk = root().join(&file);
    if !on_disk.exists() {
        return Some(format!("{target}: {} does not exist", file.display()));
    }
    if anchor.is_empty() {
        return None;
    }
    if on_disk.extension().is_none_or(|ext| ext != "md") {
        return Some(format!(
            "{target}: an anchor into a file that is not Markdown"
        ));
    }
    let known = anchors(&std::fs::read_to_string(&on_disk).unwrap());
    (!known.contains(anchor))
        .then(|| format!("{target}: {} has no heading #{anchor}", file.display()))
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        for target in links(&read(&page)) {
            checked += 1;
            if let Some(problem) = broken(&page, &target) {
                problems.push(format!("{page}: {problem}"));
            }
        }
    }
    assert!(checked > 100, "only {checked} links found");
    assert!(
        problems.is_empty(),
        "broken links:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn anchors_are_made_as_a_code_host_makes_them() {
    let page =
        "# Install on a hub\n## `fleetform plan`\n## Sizing & benchmarks\n## Notes\n## Notes\n";
    let expected = [
        "install-on-a-hub",
        "fleetform-plan",
        "sizing--benchmarks",
        "notes",
        "notes-1",
    ];
    assert_eq!(
        anchors(page),
        expected.map(String::from).into_iter().collect()
    );
    assert_eq!(
        broken("docs/x.md", "../README.md#no-such-heading").as_deref(),
        Some("../README.md#no-such-heading: README.md has no heading #no-such-heading")
    );
    assert!(broken("docs/x.md", "../../outside.md").is_some());
    assert!(broken("docs/x.md", "https://example.com/#anything").is_none());
}

/// The cells of each row of the first table whose header is `header`.
fn table(text: &str, header: &[&str]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut cell: Option<String> = None;
    let mut in_head = false;
    let mut matched = None;
    for event in parser(text) {
        match event {
            Event::Start(Tag::Table(_)) if matched.is_none() => matched = Some(false),
            Event::Start(Tag::TableHead) => in_head = true,
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::Text(text) | Event::Code(text) => {
                if let Some(cell) = &mut cell {
                    cell.push_str(&text);
                }
            }
            Event::End(TagEnd::TableCell) => row.extend(cell.take()),
            Event::End(TagEnd::TableHead) => {
                in_head = false;
                if matched == Some(false) {
                    let found: Vec<&str> = row.iter().map(String::as_str).collect();
                    matched = (found == header).then_some(true);
                }
                row.clear();
            }
            Event::End(TagEnd::TableRow) if !in_head => {
                if matched == Some(true) {
                    rows.push(std::mem::take(&mut row));
                }
                row.clear();
            }
            Event::End(TagEnd::Table) if matched == Some(true) => return rows,
            Event::End(TagEnd::Table) => matched = None,
            _ => {}
        }
    }
    rows
}

fn words(cell: &str) -> Vec<String> {
    cell.split(',')
        .map(|word| word.trim().to_string())
        .filter(|word| !word.is_empty())
        .collect()
}

/// A rule as `(API group, resources, verbs)`, resources sorted.
type Rule = (String, Vec<String>, Vec<String>);

/// The ClusterRole `fleetform install` writes, rule by rule.
fn installed_rules() -> Vec<Rule> {
    let role = fleetform::deploy::hub_rbac()
        .into_iter()
        .find(|document| document["kind"] == "ClusterRole")
        .expect("the hub's ClusterRole");
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item.as_str().unwrap().to_string())
            .collect()
    };
    let mut rules = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let mut resources = strings(&rule["resources"]);
        resources.sort();
        for group in strings(&rule["apiGroups"]) {
            rules.push((group, resources.clone(), strings(&rule["verbs"])));
        }
    }
    rules.sort();
    rules
}

/// The RBAC table of the install guide, row by row: the API group (`core` is `""`), the
/// resources and the verbs.
fn documented_rules(text: &str) -> Vec<Rule> {
    let mut rules: Vec<Rule> = table(text, &["API group", "resources", "verbs", "why"])
        .into_iter()
        .map(|row| {
            let group = match row[0].trim() {
                "core" => String::new(),
                group => group.to_string(),
            };
            let mut resources = words(&row[1]);
            resources.sort();
            (group, resources, words(&row[2]))
        })
        .collect();
    rules.sort();
    rules
}

#[test]
fn the_rbac_table_is_the_cluster_role_install_writes() {
    let documented = documented_rules(&read(RBAC_PAGE));
    let installed = installed_rules();
    assert!(installed.len() >= 10, "{installed:#?}");
    let only_documented: Vec<_> = documented
        .iter()
        .filter(|r| !installed.contains(r))
        .collect();
    let only_installed: Vec<_> = installed
        .iter()
        .filter(|r| !documented.contains(r))
        .collect();
    assert!(
        only_documented.is_empty() && only_installed.is_empty(),
        "{RBAC_PAGE}'s table differs from the ClusterRole of src/deploy/manifests.rs:\n  \
         in the table only: {only_documented:#?}\n  in the ClusterRole only: {only_installed:#?}"
    );
}

#[test]
fn a_wrong_rbac_row_is_found() {
    let text = read(RBAC_PAGE);
    // A verb the role does not grant, or a resource put in another group, is a difference.
    let extra_verb = text.replacen(
        "| `events.k8s.io` | events | get, list, watch, create, update, patch |",
        "| `events.k8s.io` | events | get, list, watch, create, update, patch, delete |",
        1,
    );
    assert_ne!(
        extra_verb, text,
        "the events.k8s.io row is where this test expects it"
    );
    assert_ne!(documented_rules(&extra_verb), installed_rules());
    let other_group = text.replacen(
        "| `cluster.open-cluster-management.io` | managedclustersets/join |",
        "| `register.open-cluster-management.io` | managedclustersets/join |",
        1,
    );
    assert_ne!(
        other_group, text,
        "the join row is where this test expects it"
    );
    assert_ne!(documented_rules(&other_group), installed_rules());
}

/// Lines of a page outside code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_code = Vec::new();
    for (event, range) in parser(text).into_offset_iter() {
        if let Event::Start(Tag::CodeBlock(_)) = event {
            in_code.push(range);
        }
    }
    let mut offset = 0;
    let mut lines = Vec::new();
    for (index, line) in text.split('\n').enumerate() {
        if !in_code.iter().any(|range| range.contains(&offset)) {
            lines.push((index + 1, line));
        }
        offset += line.len() + 1;
    }
    lines
}

/// The cells of a table row (`\|` is a `|` inside a cell).
fn cells(line: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut chars = line.trim().trim_start_matches('|').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells
        .into_iter()
        .map(|cell| cell.trim().to_string())
        .collect()
}

/// What is too long to read at a glance: a line of prose or a table cell over the limit.
fn too_long(page: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (number, line) in prose_lines(text) {
        let pieces = if line.trim_start().starts_with('|') {
            cells(line)
        } else {
            vec![line.to_string()]
        };
        for piece in pieces {
            let length = piece.chars().count();
            if length > MAX_LINE_CHARS {
                let start: String = piece.chars().take(60).collect();
                problems.push(format!("{page}:{number}: {length} characters: {start}…"));
            }
        }
    }
    problems
}

#[test]
fn the_readme_is_short_and_no_line_or_cell_is_too_long_to_read() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}"
    );
    let problems: Vec<String> = pages()
        .into_iter()
        .flat_map(|page| too_long(&page, &read(&page)))
        .collect();
    assert!(
        problems.is_empty(),
        "too long to read:\n  {}",
        problems.join("\n  ")
    );
    let long = format!(
        "| `x` | {} |\n\n```text\n{}\n```\n",
        "a".repeat(301),
        "b".repeat(400)
    );
    assert_eq!(
        too_long("t.md", &long).len(),
        1,
        "a long cell, not a long code line"
    );
}

/// The defaults the generated references give, by field or flag name: a fleet field by its
/// last name (`leaseDurationSeconds`), a flag by `--name`.
fn known_defaults() -> BTreeMap<String, BTreeSet<String>> {
    let mut defaults: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut add = |name: &str, value: &str| {
        defaults
            .entry(name.to_string())
            .or_default()
            .insert(value.to_string());
    };
    for page in GENERATED {
        for (_, line) in prose_lines(&read(page)) {
            let row = cells(line);
            if row.len() < 3 || !row[0].starts_with('`') {
                continue;
            }
            let default = row[2].rsplit(", else ").next().unwrap_or_default();
            let default = default.trim_matches('`').replace("\\|", "|");
            for name in row[0].split(", ") {
                let name = name.trim_matches('`');
                let name = name
                    .rsplit('.')
                    .next()
                    .unwrap_or(name)
                    .trim_end_matches("[]");
                if !default.is_empty() && !default.starts_with('$') {
                    add(name, &default);
                } else {
                    add(name, "");
                }
            }
        }
    }
    defaults
}

/// Every `` `name` [value] `` of the hand-written pages: a default given in brackets.
fn bracketed(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("` [") {
        let before = &rest[..at];
        let after = &rest[at + 3..];
        rest = after;
        let Some(close) = after.find(']') else { break };
        if after[close + 1..].starts_with('(') {
            continue;
        }
        let Some(open) = before.rfind('`') else {
            continue;
        };
        let name = before[open + 1..]
            .split([':', ' ', '='])
            .next()
            .unwrap_or_default();
        found.push((name.to_string(), after[..close].to_string()));
    }
    found
}

#[test]
fn bracketed_defaults_in_the_hand_written_pages_are_the_real_ones() {
    let known = known_defaults();
    assert!(
        known
            .get("leaseDurationSeconds")
            .is_some_and(|d| d.contains("60"))
    );
    assert!(known.get("--timeout").is_some_and(|d| d.contains("300")));
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages()
        .into_iter()
        .filter(|page| !GENERATED.contains(&page.as_str()))
    {
        for (name, value) in bracketed(&read(&page)) {
            let short = name.rsplit('.').next().unwrap_or(&name).to_string();
            checked += 1;
            match known.get(&short) {
                Some(defaults) if defaults.contains(&value) => {}
                Some(defaults) => problems.push(format!(
                    "{page}: `{name}` [{value}], where the default is one of {defaults:?}"
                )),
                None => problems.push(format!(
                    "{page}: `{name}` [{value}] names no field or flag with a default"
                )),
            }
        }
    }
    assert!(checked >= 20, "only {checked} bracketed defaults found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(
        bracketed("`leaseDurationSeconds` [60] and `--timeout` [300] but `x` [link](y)"),
        [
            ("leaseDurationSeconds".into(), "60".into()),
            ("--timeout".into(), "300".into())
        ]
    );
}

/// Every page of docs/ is reachable from the docs index, so none is written and then lost.
#[test]
fn the_docs_index_links_every_page() {
    let index = read("docs/README.md");
    let linked: BTreeSet<PathBuf> = links(&index)
        .into_iter()
        .filter_map(|target| {
            let path = target.split('#').next().unwrap_or_default().to_string();
            normalise(&Path::new("docs").join(path))
        })
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .filter(|page| page.starts_with("docs/") && page != "docs/README.md")
        .filter(|page| !linked.contains(Path::new(page)))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/README.md links none of {missing:?}"
    );
}
