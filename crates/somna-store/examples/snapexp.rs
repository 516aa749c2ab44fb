//! Temporary experiment (to be deleted): does a kill during sled's open leave a half-written
//! `snap.*.generating` file that makes the next open fail with corruption?
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        let db = sled::open(&args[2]).unwrap();
        println!("opened");
        use std::io::Write as _;
        std::io::stdout().flush().unwrap();
        for i in 0..200u64 {
            db.insert(format!("child-{}", i).as_bytes(), vec![0u8; 100])
                .unwrap();
        }
        db.flush().unwrap();
        std::thread::sleep(Duration::from_secs(100));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path =
        std::env::var("SNAPDIR").unwrap_or_else(|_| dir.path().to_str().unwrap().to_string());
    if std::env::var("SETUP_ONLY").is_err() && std::path::Path::new(&format!("{path}/db")).exists()
    {
        println!("reusing");
    } else {
        let db = sled::open(&path).unwrap();
        for i in 0..1_000_000u64 {
            db.insert(i.to_be_bytes(), vec![1u8; 20]).unwrap();
        }
        db.flush().unwrap();
    }
    // Measure a child's open time.
    let exe = std::env::current_exe().unwrap();
    // Calibrate: time from spawn to "opened".
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let mut child = Command::new(&exe)
            .args(["child", &path])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 7];
        use std::io::Read as _;
        out.read_exact(&mut buf).unwrap();
        times.push(t.elapsed().as_micros() as u64);
        child.kill().unwrap();
        child.wait().unwrap();
    }
    times.sort();
    let open_us = times[2];
    println!("spawn to opened: {times:?} us");
    let (mut corrupt, mut with_generating, mut fixed) = (0, 0, 0);
    let rounds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["child", &path])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let delay = open_us.saturating_sub(4000) + (round * 7919) % 5000;
        std::thread::sleep(Duration::from_micros(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        match sled::open(&path) {
            Ok(_) => {}
            Err(e) => {
                corrupt += 1;
                let files: Vec<String> = std::fs::read_dir(&path)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect();
                println!("round {round} delay {delay}: {e}; files {files:?}");
                let generating: Vec<_> = files
                    .iter()
                    .filter(|f| f.ends_with(".generating"))
                    .collect();
                if !generating.is_empty() {
                    with_generating += 1;
                    for g in generating {
                        std::fs::remove_file(format!("{path}/{g}")).unwrap();
                    }
                    let db = sled::open(&path).unwrap();
                    assert_eq!(db.get(999_999u64.to_be_bytes()).unwrap().unwrap().len(), 20);
                    fixed += 1;
                } else {
                    println!("corruption without a .generating file; stopping");
                    break;
                }
            }
        }
    }
    println!(
        "{rounds} rounds: {corrupt} failed opens, {with_generating} with a .generating file, {fixed} opened after removing it"
    );
}
