//! The lockfile as a file: canonical, deterministic, digested, and read back strictly.

use fusion_lock::{Class, Lockfile, LockfileError, Rule, Surface, diff};

fn surface() -> Surface {
    Lockfile::parse(&fusion_lock::__example_lockfile())
        .expect("the example lockfile reads")
        .surface
}

#[test]
fn writing_is_deterministic_and_reads_back_the_same_surface() {
    let text = surface().to_lockfile();
    assert_eq!(text, surface().to_lockfile());
    let read = Lockfile::parse(&text).unwrap();
    assert_eq!(read.surface, surface());
    assert_eq!(read.surface.to_lockfile(), text);
    assert!(read.verify().is_empty());
}

#[test]
fn the_file_is_sorted_indented_json_ending_in_a_newline() {
    let text = surface().to_lockfile();
    assert!(
        text.starts_with("{\n  \"actions\": {\n    \"billing.void_invoice\": {\n"),
        "{text}"
    );
    assert!(text.ends_with("  \"format\": 1,\n  \"server\": {\n    \"access_policy\": false,\n    \"audit\": null,\n    \"exposition\": \"flat\",\n    \"instructions\": null,\n    \"name\": \"billing\",\n    \"rate_limit\": null,\n    \"version\": \"1.0.0\"\n  }\n}\n"), "{text}");
    // One member or element per line: a changed fact is a changed line.
    assert!(text.contains("\n          \"id\"\n"), "{text}");
    let digest = text
        .lines()
        .find(|line| line.contains("\"surface\": \"sha256:"))
        .unwrap();
    assert_eq!(digest.trim().len(), "\"surface\": \"sha256:\"".len() + 64);
}

#[test]
fn set_like_lists_are_written_sorted_whoever_built_the_surface() {
    let mut shuffled = surface();
    let action = shuffled.actions.get_mut("billing.void_invoice").unwrap();
    action.state.invalidates = vec!["billing.z".into(), "billing.*".into(), "billing.z".into()];
    action.access.tags = vec!["b".into(), "a".into()];
    let mut sorted = shuffled.clone();
    let action = sorted.actions.get_mut("billing.void_invoice").unwrap();
    action.state.invalidates = vec!["billing.*".into(), "billing.z".into()];
    action.access.tags = vec!["a".into(), "b".into()];
    assert_eq!(shuffled.to_lockfile(), sorted.to_lockfile());
    assert_eq!(shuffled.digest(), sorted.digest());
    assert!(diff(&shuffled, &sorted).is_empty());
}

#[test]
fn each_entry_has_its_own_digest() {
    let before = surface();
    let mut after = surface();
    after.server.version = "1.0.1".into();
    let (was, now) = (before.digests(), after.digests());
    assert_ne!(was.server, now.server);
    assert_ne!(was.surface, now.surface);
    // The action did not change: its digest did not either.
    assert_eq!(was.actions, now.actions);
    after
        .actions
        .get_mut("billing.void_invoice")
        .unwrap()
        .description = "Voids it.".into();
    assert_ne!(was.actions, after.digests().actions);
}

#[test]
fn verify_names_every_entry_whose_content_was_edited() {
    let text = surface().to_lockfile();
    let edited = text.replace("\"Voids an invoice.\"", "\"Voids any invoice.\"");
    assert_ne!(edited, text);
    let mismatches = Lockfile::parse(&edited).unwrap().verify();
    let entries: Vec<&str> = mismatches
        .iter()
        .map(|mismatch| mismatch.entry.as_str())
        .collect();
    assert_eq!(entries, ["billing.void_invoice", "surface"]);
    assert!(
        mismatches[0].to_string().contains("digests to sha256:"),
        "{}",
        mismatches[0]
    );

    // A digest for an entry that is not there, and an entry without one.
    let renamed = text.replace(
        "\"billing.void_invoice\": {\n      \"access\"",
        "\"billing.cancel\": {\n      \"access\"",
    );
    let entries: Vec<String> = Lockfile::parse(&renamed)
        .unwrap()
        .verify()
        .into_iter()
        .map(|m| m.to_string())
        .collect();
    assert!(
        entries
            .iter()
            .any(|m| m.contains("`billing.cancel`: no digest")),
        "{entries:?}"
    );
    assert!(
        entries
            .iter()
            .any(|m| m.contains("`billing.void_invoice`: a digest")),
        "{entries:?}"
    );
}

#[test]
fn what_is_not_a_lockfile_is_refused_with_the_reason() {
    assert!(matches!(
        Lockfile::parse("<<<<<<< HEAD\n{}"),
        Err(LockfileError::Json(_))
    ));
    assert_eq!(Lockfile::parse("{}"), Err(LockfileError::Format(None)));
    let text = surface().to_lockfile();
    let future = text.replace("\"format\": 1", "\"format\": 2");
    assert_eq!(
        Lockfile::parse(&future),
        Err(LockfileError::Format(Some(2)))
    );
    assert!(
        Lockfile::parse(&future)
            .unwrap_err()
            .to_string()
            .contains("format 2")
    );
    let unknown = text.replace("\"title\": ", "\"titel\": ");
    let error = Lockfile::parse(&unknown).unwrap_err();
    assert!(
        matches!(&error, LockfileError::Shape(message) if message.contains("titel")),
        "{error}"
    );
}

#[test]
fn a_class_reads_from_its_name() {
    assert_eq!("risky".parse::<Class>(), Ok(Class::Risky));
    assert_eq!(format!("[{:<8}]", Class::Safe), "[safe    ]");
    assert!(
        Rule::table().contains("| breaking | `destructive` flipped | `destructive-flipped` |\n")
    );
}
