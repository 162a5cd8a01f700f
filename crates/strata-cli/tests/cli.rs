//! The `strata db` commands against a real database directory.

use std::process::Command;

fn strata(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn put_get_scan_delete_and_history_through_the_cli() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let (ok, lsn1, err) = strata(&["db", db, "put", "apple", "red"]);
    assert!(ok, "{err}");
    assert_eq!(lsn1.trim(), "1");
    assert!(strata(&["db", db, "put", "banana", "yellow"]).0);
    assert!(strata(&["db", db, "put", "apple", "green"]).0);
    assert_eq!(strata(&["db", db, "get", "apple"]).1.trim(), "green");
    assert_eq!(
        strata(&["db", db, "get", "apple", "--lsn", "1"]).1.trim(),
        "red"
    );
    assert!(strata(&["db", db, "flush"]).0);
    assert_eq!(
        strata(&["db", db, "scan"]).1,
        "apple\tgreen\nbanana\tyellow\n"
    );
    assert_eq!(
        strata(&["db", db, "scan", "--from", "b"]).1,
        "banana\tyellow\n"
    );
    assert!(strata(&["db", db, "delete", "apple"]).0);
    let (ok, _, err) = strata(&["db", db, "get", "apple"]);
    assert!(!ok && err.contains("not found"), "{err}");
    assert_eq!(
        strata(&["db", db, "--hex", "get", "62616e616e61"]).1.trim(),
        "79656c6c6f77"
    );
    assert!(strata(&["db", db, "stats"]).1.contains("last_lsn: 4"));
}

#[test]
fn a_directory_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(dir.path().join("x"), "y").unwrap();
    let (ok, _, err) = strata(&["db", dir.path().to_str().unwrap(), "get", "k"]);
    assert!(!ok && err.contains("not a strata database"), "{err}");
}
