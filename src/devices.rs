//! `a3g devices`: what this machine's libtorch can do with CUDA, the devices a model
//! can be put on, whether training across machines is built in, and what
//! `--precision auto` takes here.

use crate::device::CudaReport;

/// Runs `a3g devices`: libtorch's version and folder, CUDA's state, the devices a
/// model can be put on, and whether training across machines is built in.
pub fn run() -> crate::Result<()> {
    let report = CudaReport::probe();
    let version = report.libtorch_version.as_deref().unwrap_or("of unknown version");
    let folder = report
        .libtorch_dir
        .as_deref()
        .map_or_else(|| "an unknown folder".to_string(), |dir| dir.display().to_string());
    crate::console::say(&format!("libtorch {version} from {folder}"));
    crate::console::say(&report.summary());
    let mut devices = vec!["cpu (--gpu-ids -1)".to_string()];
    devices.extend((0..report.devices).map(|index| format!("cuda:{index} (--gpu-ids {index})")));
    crate::console::say(&format!("devices: {}", devices.join(", ")));
    crate::console::say(crate::distributed::built_in_line());
    let cpu_bf16 = crate::precision::native_bf16_cpu();
    crate::console::say(&format!(
        "--precision auto: {} on the CPU ({}){}",
        if cpu_bf16 { "bf16" } else { "fp32" },
        if cpu_bf16 { "it computes bf16 natively" } else { "no avx512_bf16 or amx_bf16" },
        if report.devices > 0 {
            let gpu = crate::precision::native_bf16(tch::Device::Cuda(0));
            format!(
                ", {} on cuda:0",
                if gpu { "bf16" } else { "fp32 (compute capability below 8.0)" }
            )
        } else {
            String::new()
        }
    ));
    Ok(())
}
