//! The GPU path, checked on any machine: libtorch_cuda is linked, a3g says what CUDA
//! can do here, and a GPU asked for where there is none is refused with the cause.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{assert_one_line_error, cartpole, Scratch};

/// The dynamic section of the a3g binary, as `readelf -d` prints it.
fn dynamic_section() -> String {
    let output = Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_a3g")])
        .output()
        .expect("run readelf (binutils, which the linker comes with)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The libtorch lib folder the binary was built against: its RPATH.
fn libtorch_lib() -> PathBuf {
    let dynamic = dynamic_section();
    let rpath = dynamic
        .lines()
        .find(|line| line.contains("(RPATH)"))
        .and_then(|line| line.split('[').nth(1))
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("no RPATH in a3g:\n{dynamic}"));
    PathBuf::from(rpath.split(':').next().expect("one folder at least"))
}

/// Built against a libtorch with CUDA, the binary lists libtorch_cuda.so among its
/// NEEDED libraries: without it the linker drops the library, whose CUDA kernels and
/// device hooks then never load, and every machine looks as if it had no GPU.
#[test]
fn binary_needs_libtorch_cuda() {
    let with_cuda = libtorch_lib().join("libtorch_cuda.so").exists();
    let dynamic = dynamic_section();
    let needed = dynamic
        .lines()
        .any(|line| line.contains("(NEEDED)") && line.contains("[libtorch_cuda.so]"));
    assert_eq!(needed, with_cuda, "libtorch has CUDA: {with_cuda}; readelf -d:\n{dynamic}");
}

/// `a3g devices` names libtorch's version and folder, whether its CUDA libraries are
/// loaded and for which CUDA version, and the devices --gpu-ids can name; where there
/// is no GPU it says why on one line, whether training across machines is built in
/// (as the build found gloo's headers), what `--precision auto` takes (bf16 on a CPU
/// whose flags list avx512_bf16 or amx_bf16), and it prints nothing on stderr (no
/// libtorch warnings about a missing driver).
#[test]
fn devices_reports_cuda_state() {
    let run = Scratch::new("devices").a3g(&["devices"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stderr, "");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", run.stdout);
    let folder = libtorch_lib();
    // Compared as real paths: the RPATH may run through a symlink the loader resolved.
    let reported = lines[0].split(" from ").nth(1).map(PathBuf::from);
    assert!(lines[0].starts_with("libtorch "), "{}", lines[0]);
    assert_eq!(
        reported.and_then(|path| path.canonicalize().ok()),
        folder.canonicalize().ok(),
        "{}",
        lines[0]
    );
    if folder.join("libtorch_cuda.so").exists() {
        assert!(lines[1].starts_with("CUDA libraries loaded (built for CUDA "), "{}", lines[1]);
    } else {
        assert!(lines[1].starts_with("no CUDA libraries loaded"), "{}", lines[1]);
    }
    if lines[1].contains("no CUDA device") {
        assert_eq!(lines[2], "devices: cpu (--gpu-ids -1)");
    } else {
        assert!(lines[2].contains("cuda:0 (--gpu-ids 0)"), "{}", lines[2]);
    }
    let built_in = if cfg!(a3g_c10d) { "built in" } else { "not built in" };
    assert!(
        lines[3].starts_with(&format!("training across machines: {built_in} (")),
        "{}",
        lines[3]
    );
    assert_eq!(
        lines[3].contains("and NCCL for ranks with --gpu-ids"),
        cfg!(a3g_nccl),
        "{}",
        lines[3]
    );
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let native = cpuinfo.split_whitespace().any(|flag| flag == "avx512_bf16" || flag == "amx_bf16");
    let cpu = if native { "bf16" } else { "fp32" };
    assert!(lines[4].starts_with(&format!("--precision auto: {cpu} on the CPU")), "{}", lines[4]);
    // With the CUDA wheel (its NCCL beside it) and the headers set-up fetched for it
    // (where build.rs looks), a shim that fell back to Gloo alone (a build warning
    // only) is a failure.
    let fetched = option_env!("A3G_CUDA_INCLUDE").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/cuda-headers/nvidia/cu13/include")
    });
    let wheel_nccl = folder.join("../../nvidia/nccl/include/nccl.h");
    if cfg!(a3g_c10d) && wheel_nccl.exists() && fetched.join("crt").exists() {
        assert!(
            lines[3].contains("NCCL for ranks"),
            "the shim was built without NCCL: {}",
            lines[3]
        );
    }
}

/// `--gpu-ids 0` where CUDA sees no device (none here, or hidden by an empty
/// CUDA_VISIBLE_DEVICES where there is one) is refused with CUDA's state, not with a
/// claim that a3g lacks CUDA.
#[test]
fn gpu_ids_without_a_device_say_why() {
    let scratch = Scratch::new("gpu-ids-none");
    let hidden = [("CUDA_VISIBLE_DEVICES", "")];
    let train = cartpole(&["--workers", "1", "--gpu-ids", "0"]);
    let line = assert_one_line_error(&scratch.a3g_with_env(&train, &hidden));
    assert!(line.starts_with("error: --gpu-ids 0: "), "{line}");
    assert!(
        line.contains("no CUDA device") && line.ends_with("pass -1 to run on the CPU"),
        "{line}"
    );
    if libtorch_lib().join("libtorch_cuda.so").exists() {
        assert!(line.starts_with("error: --gpu-ids 0: CUDA libraries loaded"), "{line}");
    }
    let eval = ["eval", "--env", "CartPole-v1", "--gpu-id", "0"];
    let line = assert_one_line_error(&scratch.a3g_with_env(&eval, &hidden));
    assert!(line.contains("--gpu-id 0: ") && line.contains("no CUDA device"), "{line}");
}

/// scripts/gpu-proof where a3g can see no GPU stops before any training, with its
/// error as the last line: on a machine without a driver at its first step, the driver
/// check, with that one line alone; where there is a driver (the GPU hidden here by
/// an empty CUDA_VISIBLE_DEVICES) at the next, a3g's own view of CUDA. No report is
/// written.
#[test]
fn gpu_proof_without_a_gpu_stops_with_one_line() {
    let scratch = Scratch::new("gpu-proof");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gpu-proof");
    let output = Command::new(script)
        .arg(scratch.path("report.md"))
        .current_dir(scratch.path(""))
        .env("A3G_BIN", env!("CARGO_BIN_EXE_a3g"))
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .expect("run scripts/gpu-proof");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    let lines: Vec<&str> = stderr.lines().collect();
    let driver = Command::new("sh").args(["-c", "command -v nvidia-smi"]).output();
    if driver.is_ok_and(|found| found.status.success()) {
        let last = lines.last().copied().unwrap_or("");
        assert!(last.starts_with("gpu-proof: error: a3g sees no CUDA device: "), "{stderr}");
    } else {
        assert_eq!(
            lines,
            ["gpu-proof: error: no NVIDIA driver (nvidia-smi is not installed); \
              run this on a machine with an NVIDIA GPU and its driver"]
        );
    }
    assert!(!scratch.path("report.md").exists());
}
