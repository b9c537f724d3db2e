//! Indigo end to end (issue 31): `pantheon train indigo` trains in simulated time, writes what
//! it says, resumes, refuses an unknown emulator; the `indigo` and `indigo_nocalib` schemes run
//! their committed models in simulated time and fill a link they were not trained on; a model
//! of one's own runs through a descriptor of one's own. No root needed. (`pantheon schemes
//! check indigo indigo_nocalib` in real time, through the tunnel: `tests/schemes.rs`.)

use std::path::Path;

mod common;
use common::{pantheon, pantheon_status, read_json, temp};

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

#[test]
fn train_indigo_trains_writes_its_directory_and_resumes() {
    let dir = temp("indigo-train");
    let out = dir.0.join("model");
    let train = |iterations: &str| {
        pantheon(&[
            "train",
            "indigo",
            "--emulators",
            "synthetic policer-12mbps-20ms",
            "--out",
            out.to_str().unwrap(),
            "--rollout-secs",
            "1",
            "--iterations",
            iterations,
            "--epochs",
            "2",
            "--host-latency",
            "measured",
        ])
    };
    let said = train("1");
    assert!(said.contains("25 training emulators"), "{said}");
    assert!(said.contains("host latency measured"), "{said}");
    assert!(said.contains("iteration 1:"), "{said}");
    for f in ["model.safetensors", "models/iteration-001.safetensors"] {
        assert!(out.join(f).is_file(), "{f} missing:\n{said}");
    }
    assert_eq!(lines(&out.join("training.jsonl")), 1);
    let first = read_json(&out.join("evaluation.json"));
    let first = first.as_array().unwrap();
    assert_eq!(first.len(), 25, "{first:?}");
    assert_eq!(first[0]["emulator"], "5mbps-10ms");
    assert_eq!(first[24]["emulator"], "policer-12mbps-20ms");
    assert!(first
        .iter()
        .all(|e| e["tput_mbps"].as_f64().unwrap() >= 0.0));
    // The calibrated emulator's oracle window was searched and cached.
    let oracle = read_json(&out.join("oracle.json"));
    assert!(
        oracle.to_string().contains("policer-12mbps-20ms"),
        "{oracle}"
    );
    // The same command with more iterations resumes: one more line, iteration 2 at β = ½.
    let said = train("2");
    assert!(said.contains("resuming after iteration 1"), "{said}");
    assert_eq!(lines(&out.join("training.jsonl")), 2);
    let text = std::fs::read_to_string(out.join("training.jsonl")).unwrap();
    let second: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(second["iteration"], 2);
    assert_eq!(second["beta"], 0.5);
    assert!(second["total_samples"].as_u64() > second["new_samples"].as_u64());
    // Both iterations' policies were validated, the better kept.
    let selection = read_json(&out.join("selection.json"));
    assert_eq!(selection["candidates"].as_array().unwrap().len(), 2);
    let chosen = selection["chosen"].as_u64().unwrap();
    assert!((1..=2).contains(&chosen), "{selection}");
    assert_eq!(
        std::fs::read(out.join("model.safetensors")).unwrap(),
        std::fs::read(out.join(format!("models/iteration-{chosen:03}.safetensors"))).unwrap()
    );

    // A model of one's own, run in simulated time through a descriptor of one's own.
    let schemes = dir.0.join("schemes");
    std::fs::create_dir_all(&schemes).unwrap();
    let model = out.join("model.safetensors");
    std::fs::write(
        schemes.join("mine.toml"),
        format!(
            "name = \"mine\"\nlabel = \"Mine\"\ncolor = \"indigo\"\nmarker = \"D\"\nrun_first = \"receiver\"\n\
             [dependencies]\nbinaries = [\"pantheon-quinn\"]\n\
             [receiver]\ncommand = [\"pantheon-quinn\", \"receiver\", \"{{port}}\", \"--cc\", \"indigo\", \"--model\", \"{m}\"]\n\
             [sender]\ncommand = [\"pantheon-quinn\", \"sender\", \"{{ip}}\", \"{{port}}\", \"--cc\", \"indigo\", \"--model\", \"{m}\"]\n\
             [simulation]\ncontroller = \"indigo\"\nmodel = \"{m}\"\n",
            m = model.display()
        ),
    )
    .unwrap();
    let data = dir.0.join("mine");
    sim(
        &dir.0,
        &data,
        "mine",
        &["--schemes-dir", schemes.to_str().unwrap()],
    );
    assert!(data.join("pantheon_perf.json").is_file());
}

#[test]
fn train_indigo_refuses_an_unknown_emulator_and_a_bad_agreement() {
    let dir = temp("indigo-refuse");
    let out = dir.0.join("model");
    for (args, says) in [
        (vec!["--emulators", "synthetic nowhere"], "nowhere"),
        (vec!["--agreement", "1.5"], "--agreement"),
        (vec!["--host-latency", "soon"], "--host-latency"),
    ] {
        let mut all = vec!["train", "indigo", "--out", out.to_str().unwrap()];
        all.extend(args);
        let (code, said) = pantheon_status(&all);
        assert_ne!(code, 0, "{all:?}: {said}");
        assert!(said.contains(says), "{all:?}: {said}");
        assert!(!out.join("training.jsonl").exists());
    }
}

/// `pantheon run sim` of `schemes` over 12 Mbit/s each way and a 20 ms RTT, 10 s.
fn sim(dir: &Path, data: &Path, schemes: &str, extra: &[&str]) {
    let t = dir.join("12mbps.trace");
    if !t.exists() {
        pantheon(&["trace", "constant", "12", "-o", t.to_str().unwrap()]);
    }
    let mut args = vec![
        "run",
        "sim",
        "--schemes",
        schemes,
        "--uplink-trace",
        t.to_str().unwrap(),
        "--downlink-trace",
        t.to_str().unwrap(),
        "--prepend-mm-cmds",
        "mm-delay 10",
        "--runtime",
        "10",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    args.extend(extra);
    pantheon(&args);
}

#[test]
fn the_committed_models_fill_a_link_they_were_not_trained_on() {
    // 12 Mbit/s and a 20 ms RTT: between the synthetic set's 10 and 20 Mbit/s, shorter than
    // its shortest RTT.
    let dir = temp("indigo-schemes");
    let data = dir.0.join("run");
    sim(&dir.0, &data, "indigo indigo_nocalib", &[]);
    let perf = read_json(&data.join("pantheon_perf.json"));
    for scheme in ["indigo", "indigo_nocalib"] {
        let tput = perf[scheme]["1"]["all"]["tput"].as_f64().unwrap();
        let delay = perf[scheme]["1"]["all"]["delay"].as_f64().unwrap();
        assert!(tput > 9.0, "{scheme}: {tput} Mbit/s of 12");
        // The path's 10 ms and a standing queue of at most a few RTTs.
        assert!((10.0..100.0).contains(&delay), "{scheme}: p95 {delay} ms");
    }
}
