//! The `sharing-affinity` CLI.

fn main() {
    eprintln!("sharing-affinity: the replay command is not built yet");
    std::process::exit(2);
}
