//! End to end: `tickplant match` on the language example and the worked cross-venue example
//! of docs/matching.md, and its errors.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

#[test]
fn match_writes_one_line_per_event_and_errors_say_where() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(
        p.join("strategies.txt"),
        "# buy ABX in Toronto when it is cheaper there than in New York\n\
         7: symbol = \"ABX\" and tsx_ask < nyse_bid and tsx_ask <= 40.04\n\
         8: symbol in (\"AAPL\", \"MSFT\") and spread < 0.01 and last > 190\n",
    )
    .unwrap();
    std::fs::write(
        p.join("events.jsonl"),
        "{\"symbol\": \"ABX\", \"tsx_ask\": 40.01, \"nyse_bid\": \"40.02\"}\n\
         {\"symbol\": \"ABX\", \"tsx_ask\": 40.03, \"nyse_bid\": 40.02}\n\
         {\"symbol\": \"MSFT\", \"spread\": 0.005, \"last\": 190.01}\n",
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(["match", "--strategies", "strategies.txt", "--events", "events.jsonl"])
        .current_dir(p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "{\"event\": 0, \"matches\": [7]}\n{\"event\": 1, \"matches\": []}\n{\"event\": 2, \"matches\": [8]}\n"
    );
    std::fs::write(p.join("bad.txt"), "1: x = 1\n2: x < \"a\"\n").unwrap();
    let o = Command::new(BIN)
        .args(["match", "--strategies", "bad.txt", "--events", "events.jsonl"])
        .current_dir(p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("bad.txt: line 2, column 8: strings are compared with = and != only"), "{err}");
    std::fs::write(p.join("bad.jsonl"), "{\"symbol\": \"ABX\"}\n{\"symbol\": 5}\n").unwrap();
    let o = Command::new(BIN)
        .args(["match", "--strategies", "strategies.txt", "--events", "bad.jsonl"])
        .current_dir(p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.jsonl line 2: symbol is a string attribute"), "{err}");
}

/// Numbers as JSON writers give them: exponents (`json.dumps(0.00001)` is `1e-05`) are
/// exact like any other number; one needing a tenth decimal place is refused, not rounded.
#[test]
fn match_takes_json_numbers_in_every_notation() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("s.txt"), "1: x = 150\n2: x = 0.00001\n3: x > 100000000000000\n").unwrap();
    std::fs::write(p.join("e.jsonl"), "{\"x\": 1.5e2}\n{\"x\": 1e-05}\n{\"x\": 1E+16}\n{\"x\": 150.0}\n").unwrap();
    let run = |events: &str| {
        Command::new(BIN).args(["match", "--strategies", "s.txt", "--events", events]).current_dir(p).output().unwrap()
    };
    let o = run("e.jsonl");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "{\"event\": 0, \"matches\": [1]}\n{\"event\": 1, \"matches\": [2]}\n\
         {\"event\": 2, \"matches\": [3]}\n{\"event\": 3, \"matches\": [1]}\n"
    );
    // null is a missing value (pandas writes one for NaN): the attribute is left out.
    std::fs::write(p.join("null.jsonl"), "{\"x\": null}\n{\"x\": 150, \"y\": null}\n").unwrap();
    let o = run("null.jsonl");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "{\"event\": 0, \"matches\": []}\n{\"event\": 1, \"matches\": [1]}\n"
    );
    std::fs::write(p.join("bad.jsonl"), "{\"x\": 1e-10}\n").unwrap();
    let err = String::from_utf8_lossy(&run("bad.jsonl").stderr).to_string();
    assert!(err.contains("bad.jsonl line 1: x: \"1e-10\" has more than 9 decimal places"), "{err}");
    std::fs::write(p.join("big.jsonl"), "{\"x\": \"1000000000000000000000000000000\"}\n").unwrap();
    let err = String::from_utf8_lossy(&run("big.jsonl").stderr).to_string();
    assert!(err.contains("big.jsonl line 1: x: \"1000000000000000000000000000000\" is too large"), "{err}");
}

/// The worked example of docs/matching.md, as written there: its files, its command, and
/// the output it shows.
#[test]
fn matching_doc_worked_example_runs_as_shown() {
    let doc = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/matching.md"))
        .unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut blocks = doc.split("```").skip(1).step_by(2);
    let (mut files, mut commands, mut shown) = (0, Vec::new(), None);
    for b in blocks.by_ref() {
        let (info, body) = b.split_once('\n').unwrap();
        if let Some(name) = info.strip_prefix("text file=") {
            std::fs::write(d.path().join(name), body).unwrap();
            files += 1;
        } else if info == "sh" {
            commands.extend(body.lines().filter(|l| l.starts_with("tickplant ")).map(str::to_owned));
        } else if info == "text output" {
            shown = Some(body.to_string());
        }
    }
    assert_eq!((files, commands.len()), (2, 1));
    let args: Vec<&str> = commands[0].split_whitespace().skip(1).collect();
    let o = Command::new(BIN).args(&args).current_dir(d.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), shown.expect("the output block"));
}

/// `bench match --sweep`: one row per strategy count, the index's results compared with
/// brute force on each (a difference fails the command); the published shape's workload
/// `p` matches about one strategy in a thousand.
#[test]
fn bench_match_sweeps_the_strategy_counts() {
    let o = Command::new(BIN)
        .args(["bench", "match", "--workload", "p", "--sweep", "250,2000", "--events", "40"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Vec<Vec<f64>> = out
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().map(|w| w.trim_end_matches('x').parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!((rows[0][0], rows[1][0]), (250.0, 2000.0));
    // Matches an event: 2,000 strategies, about one in a thousand.
    assert!(rows[1][1] > 0.3 && rows[1][1] < 10.0, "{out}");
    assert!(out.contains("results compared"), "{out}");
    let o = Command::new(BIN).args(["bench", "match", "--workload", "p", "--sweep", "0"]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("above 0"));
}
