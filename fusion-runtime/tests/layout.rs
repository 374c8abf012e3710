//! The runtime's modules import each other without cycles: each stage of the request path can
//! be read, tested and changed on its own, and new features land in one place.
//!
//! The graph is read from the sources: an edge `a -> b` for every `crate::b` path in module
//! `a` (a top-level module and its submodules), outside comments and unit-test modules.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable src") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

/// The top-level modules named by `crate::…` paths, including `use crate::{a::X, b}` groups.
fn references(text: &str) -> BTreeSet<String> {
    let code: String = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |text: &str| -> String {
        text.chars()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (start, _) in code.match_indices("crate::") {
        let rest = &code[start + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at depth-zero commas.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            found.insert(ident(&item));
        } else {
            found.insert(ident(rest));
        }
    }
    found
}

#[test]
fn runtime_modules_have_no_import_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|file| module_of(&src, file))
        .filter(|module| module != "lib")
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" {
            continue;
        }
        let text = fs::read_to_string(file).expect("a readable source");
        let targets = edges.entry(module.clone()).or_default();
        for target in references(&text) {
            if target != module && modules.contains(&target) {
                targets.insert(target);
            }
        }
    }
    // The graph is non-trivial: the check would pass vacuously if the reader broke.
    assert!(edges["pipeline"].contains("envelope"), "{edges:?}");
    assert!(edges["middleware"].contains("action"), "{edges:?}");

    // Depth-first search; a back edge is a cycle, reported with its path.
    fn visit(
        module: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Result<(), Vec<String>> {
        if let Some(position) = path.iter().position(|seen| seen == module) {
            let mut cycle = path[position..].to_vec();
            cycle.push(module.to_owned());
            return Err(cycle);
        }
        if done.contains(module) {
            return Ok(());
        }
        path.push(module.to_owned());
        for next in edges.get(module).into_iter().flatten() {
            visit(next, edges, path, done)?;
        }
        path.pop();
        done.insert(module.to_owned());
        Ok(())
    }
    let mut done = BTreeSet::new();
    for module in &modules {
        if let Err(cycle) = visit(module, &edges, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_reader_finds_grouped_and_nested_paths() {
    let text =
        "use crate::{a::X, b, c::{d, e::F}};\nfn f() { crate::g::h(); }\n// crate::ignored\n";
    let found: Vec<String> = references(text).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "g"]);
}
