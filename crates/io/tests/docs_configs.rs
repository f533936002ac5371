//! Every TOML block of the user documentation is a config the pipeline takes: its keys,
//! their types and their words, and the pipeline's checks of the values
//! (`RunConfig::spec`). A fragment of a few sections is read after a minimal `[source]`
//! (live groups where it has a `[recovery]`, which only live runs take), in a folder that
//! holds the files consumers name (empty, but for a trade consumer's password file: a
//! line).

use std::path::Path;

use tickplant_io::config::RunConfig;

#[test]
fn every_documented_config_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    let dir = tempfile::tempdir().unwrap();
    for name in ["strategies.txt", "triggers.txt"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    std::fs::write(dir.path().join("fix-password"), "s3cret\n").unwrap();
    let (mut checked, mut bad) = (0, Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, block) in text.split("```toml\n").skip(1).enumerate() {
            let block = block.split("```").next().unwrap();
            let toml = if block.contains("[source]") {
                block.to_string()
            } else if block.contains("[recovery]") {
                format!("[source]\na = \"udp://239.1.1.1:5001\"\nb = \"udp://239.1.1.2:5002\"\n{block}")
            } else {
                format!("[source]\na = \"a.pcap\"\n{block}")
            };
            let path = dir.path().join("config.toml");
            std::fs::write(&path, toml).unwrap();
            checked += 1;
            if let Err(e) = RunConfig::load(&path).and_then(|c| c.spec(false).map(|_| ())) {
                bad.push(format!("{} (TOML block {}): {e}", f.display(), i + 1));
            }
        }
    }
    assert!(checked >= 8, "found only {checked} TOML blocks");
    assert!(bad.is_empty(), "documented configs the pipeline refuses:\n{}", bad.join("\n"));
}
