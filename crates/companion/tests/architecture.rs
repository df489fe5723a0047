//! The layering, checked from the source: no import circle among the files of the application
//! core or of the desktop shell, and `impl Companion` only in the facade (`src/app/`).
//!
//! A file imports another when it names it in a `use` line or a `crate::`/`super::`/`self::`
//! path; a path naming an item resolves to the file of the deepest module it passes through.
//! Test modules are left out (from the first `#[cfg(test)]` on): tests may reach anywhere.
//! `mod.rs` files that only declare and re-export their children are fine, as long as nothing
//! below imports them back; so features import the precise file (`crate::view::call::CallView`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`["view", "call"]`) → file, relative to the source root.
type Modules = BTreeMap<Vec<String>, String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every module file under `root` (binaries apart), with its source as the test reads it.
fn modules(root: &Path) -> (Modules, BTreeMap<String, String>) {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut modules = Modules::new();
    let mut sources = BTreeMap::new();
    for file in files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with("bin/") || rel == "main.rs" {
            continue;
        }
        let mut parts: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_owned)
            .collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
            parts.pop();
        }
        modules.insert(parts, rel.clone());
        sources.insert(rel, std::fs::read_to_string(&file).unwrap());
    }
    (modules, sources)
}

/// The source without its test modules and comments.
fn code(source: &str) -> String {
    let source = source.split("#[cfg(test)]").next().unwrap_or_default();
    source
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    // `x as y` imports x: the alias is marked before the spaces go.
    let tree: String = tree.replace(" as ", "@").split_whitespace().collect();
    let Some(open) = tree.find("::{") else {
        return vec![tree.split('@').next().unwrap_or_default().to_owned()];
    };
    let prefix = &tree[..open];
    let body = &tree[open + 3..tree.len() - 1];
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    let bytes: Vec<char> = body.chars().collect();
    let mut pieces = Vec::new();
    for (i, c) in bytes.iter().enumerate() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(bytes[start..i].iter().collect::<String>());
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(bytes[start..].iter().collect::<String>());
    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
        if piece == "self" {
            out.push(prefix.to_owned());
        } else {
            out.extend(expand(&piece).into_iter().map(|p| format!("{prefix}::{p}")));
        }
    }
    out
}

/// The paths a file names: its `use` trees and its inline `crate::`/`super::`/`self::` paths.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(end) = rest.find(';') {
            out.extend(expand(rest[..end].trim()));
        }
    }
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if starts_word {
            for head in ["crate::", "super::", "self::"] {
                if chars[i..].iter().take(head.len()).copied().eq(head.chars()) {
                    let mut j = i;
                    while j < chars.len()
                        && (chars[j].is_alphanumeric() || chars[j] == '_' || chars[j] == ':')
                    {
                        j += 1;
                    }
                    out.push(
                        chars[i..j]
                            .iter()
                            .collect::<String>()
                            .trim_end_matches(':')
                            .to_owned(),
                    );
                    i = j;
                    break;
                }
            }
        }
        i += 1;
    }
    out
}

/// The file-level import graph of the source under `root`.
fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let (modules, sources) = modules(root);
    let mut edges = BTreeMap::new();
    for (module, file) in &modules {
        let mut targets = BTreeSet::new();
        for path in paths(&code(&sources[file])) {
            let segs: Vec<&str> = path.split("::").collect();
            let (mut base, mut rest): (Vec<String>, &[&str]) = match segs[0] {
                "crate" => (Vec::new(), &segs[1..]),
                "self" => (module.clone(), &segs[1..]),
                "super" => {
                    let mut b = module.clone();
                    b.pop();
                    (b, &segs[1..])
                }
                _ => continue,
            };
            while rest.first() == Some(&"super") {
                base.pop();
                rest = &rest[1..];
            }
            let full: Vec<String> = base
                .into_iter()
                .chain(rest.iter().map(|s| (*s).to_owned()))
                .collect();
            let target = (0..=full.len()).rev().find_map(|n| modules.get(&full[..n]));
            if let Some(target) = target.filter(|t| *t != file) {
                targets.insert(target.clone());
            }
        }
        edges.insert(file.clone(), targets);
    }
    edges
}

/// The groups of files that import each other, each sorted (Tarjan's algorithm).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    group.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

fn crate_dir(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

#[test]
fn the_core_has_no_import_circle() {
    let found = circles(&graph(&crate_dir("src")));
    assert!(
        found.is_empty(),
        "files of crates/companion/src import each other: {found:?}"
    );
}

#[test]
fn the_shell_has_no_import_circle() {
    let found = circles(&graph(&crate_dir("../../src-tauri/src")));
    assert!(
        found.is_empty(),
        "files of src-tauri/src import each other: {found:?}"
    );
}

#[test]
fn only_the_facade_implements_companion() {
    let (_, sources) = modules(&crate_dir("src"));
    let outside: Vec<&String> = sources
        .iter()
        .filter(|(file, source)| {
            !file.starts_with("app/") && code(source).contains("impl Companion")
        })
        .map(|(file, _)| file)
        .collect();
    assert!(
        outside.is_empty(),
        "`impl Companion` outside src/app/: {outside:?}"
    );
}

#[test]
fn a_circle_is_found_through_use_trees_and_inline_paths() {
    let dir = std::env::temp_dir().join(format!("architecture-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("page")).unwrap();
    let write = |f: &str, s: &str| std::fs::write(dir.join(f), s).unwrap();
    write("lib.rs", "mod leaf;\nmod page;\nmod feature;\n");
    write("leaf.rs", "pub struct Text;\n");
    // `page` reaches `feature` through a nested use tree, `feature` reaches `page` inline.
    write(
        "page/mod.rs",
        "use crate::{leaf::Text, feature::{self, Feature}};\n",
    );
    write(
        "feature.rs",
        "use crate::leaf::Text;\nfn f() { crate::page::g(); }\n#[cfg(test)]\nmod tests { use crate::lib; }\n",
    );
    let edges = graph(&dir);
    assert_eq!(
        circles(&edges),
        vec![vec!["feature.rs".to_owned(), "page/mod.rs".to_owned()]]
    );
    // Without the inline path there is no circle; `leaf` is imported by both, never importing.
    write(
        "feature.rs",
        "use crate::leaf::Text;\n// crate::page::g()\n",
    );
    assert!(circles(&graph(&dir)).is_empty());
    assert!(graph(&dir)["page/mod.rs"].contains("leaf.rs"));
    std::fs::remove_dir_all(&dir).unwrap();
}
