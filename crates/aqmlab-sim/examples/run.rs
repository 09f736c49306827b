//! `cargo run --release --example run -- SCENARIO.toml [key=value ...]`: prints summary.json.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let text = std::fs::read_to_string(&args[0]).expect("read scenario");
    match aqmlab_sim::run_toml(&text, None, &args[1..]) {
        Ok(out) => println!("{}", serde_json::to_string_pretty(&out.summary).unwrap()),
        Err(e) => {
            eprintln!("{}: {e}", args[0]);
            std::process::exit(2);
        }
    }
}
