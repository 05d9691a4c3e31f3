//! Devices: choosing where models run from the GPU flags, with a clear refusal when a
//! GPU asked for is not there; what this process's libtorch can do with CUDA (which
//! `a3g devices` reports); and the host syncs, the reads and waits through which values come back
//! from a device, each counted.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use tch::{Cuda, Device, Kind, Tensor};

use crate::error::{Error, Result};

/// The device for `--gpu-id`: -1 is the CPU, 0 and up a CUDA device that must exist.
pub fn select(gpu_id: i64) -> Result<Device> {
    if gpu_id == -1 {
        return Ok(Device::Cpu);
    }
    cuda(gpu_id, &format!("--gpu-id {gpu_id}"))
}

/// The devices for `--gpu-ids`: `[-1]` is the CPU alone; otherwise every id must be a
/// CUDA device that exists, each listed once.
pub fn select_list(gpu_ids: &[i64]) -> Result<Vec<Device>> {
    let flag =
        format!("--gpu-ids {}", gpu_ids.iter().map(i64::to_string).collect::<Vec<_>>().join(" "));
    if gpu_ids == [-1] {
        return Ok(vec![Device::Cpu]);
    }
    if gpu_ids.contains(&-1) {
        return Err(Error::BadArguments(format!(
            "{flag}: -1 (the CPU) cannot be mixed with GPU ids; give GPU ids only, or -1 alone"
        )));
    }
    if let Some(repeated) =
        gpu_ids.iter().enumerate().find(|(index, id)| gpu_ids[..*index].contains(id))
    {
        return Err(Error::BadArguments(format!(
            "{flag}: GPU {} is listed twice; list each GPU once",
            repeated.1
        )));
    }
    gpu_ids.iter().map(|&id| cuda(id, &flag)).collect()
}

fn cuda(gpu_id: i64, flag: &str) -> Result<Device> {
    let refuse = |problem: String| Error::BadArguments(format!("{flag}: {problem}"));
    if gpu_id < 0 {
        return Err(refuse("GPU ids start at 0; -1 runs on the CPU".into()));
    }
    let report = CudaReport::probe();
    let count = report.devices;
    if count == 0 || !Cuda::is_available() {
        return Err(refuse(format!("{}; pass -1 to run on the CPU", report.summary())));
    }
    if gpu_id >= count {
        let found: Vec<String> = (0..count).map(|index| format!("cuda:{index}")).collect();
        return Err(refuse(format!(
            "GPU {gpu_id} does not exist; this machine has {count} CUDA device(s): {}; \
             pick among them, or -1 for the CPU",
            found.join(", ")
        )));
    }
    load_cuda_linear_algebra(gpu_id as usize).map_err(refuse)?;
    Ok(Device::Cuda(gpu_id as usize))
}

/// libtorch loads its CUDA linear algebra (the QR of the orthogonal initialisation)
/// on first use, and that load breaks when several threads reach it at once: on an
/// H200, 32 workers building their models together failed with "lazy wrapper should be
/// called at most once". One QR here, in the thread that chose the GPU and before any
/// worker exists, loads it for the process (the library is one for every GPU).
fn load_cuda_linear_algebra(gpu: usize) -> std::result::Result<(), String> {
    static LOADED: std::sync::OnceLock<std::result::Result<(), String>> =
        std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            Tensor::f_eye(2, (Kind::Float, Device::Cuda(gpu)))
                .and_then(|identity| Tensor::f_linalg_qr(&identity, "reduced"))
                .map(drop)
                .map_err(|error| {
                    let reason = error.to_string().lines().next().unwrap_or_default().to_owned();
                    format!(
                        "CUDA's linear algebra would not load ({reason}); check the CUDA libraries with \
                         `a3g devices`"
                    )
                })
        })
        .clone()
}

/// The device of worker `rank`: `devices[rank mod n]`, as the reference maps its
/// processes to `--gpu-ids`.
pub fn for_worker(devices: &[Device], rank: usize) -> Device {
    devices[rank % devices.len()]
}

thread_local! {
    /// Host syncs this thread has made through [`read`], [`copy_to_host`] and
    /// [`synchronize`].
    static HOST_SYNCS: Cell<u64> = const { Cell::new(0) };
}

fn count_sync() {
    HOST_SYNCS.with(|syncs| syncs.set(syncs.get() + 1));
}

/// Host syncs the calling thread has made so far. On a GPU each one stalls the thread
/// until the device has run all the work queued before it, and a thread that syncs
/// often keeps the GPU waiting for the next launch. On the CPU they cost nothing but
/// are counted the same, so tests without a GPU check how often a GPU would wait.
pub fn host_syncs() -> u64 {
    HOST_SYNCS.with(Cell::get)
}

/// The values of `tensor`, flattened, as f64 on the host: one host sync. Every value
/// a3g reads back from a model's device comes through here or [`copy_to_host`], so
/// read what one decision needs in one call.
pub fn read(tensor: &Tensor) -> Vec<f64> {
    count_sync();
    host_values(&tensor.detach().to_kind(Kind::Double).to_device(Device::Cpu))
}

/// The values of `host`, a tensor in host memory (such as a buffer [`copy_to_host`]
/// filled), flattened, as f64: no sync.
pub fn host_values(host: &Tensor) -> Vec<f64> {
    assert_eq!(host.device(), Device::Cpu, "host_values reads host memory only");
    let host = host.to_kind(Kind::Double).contiguous();
    Vec::<f64>::try_from(host.reshape([-1])).expect("a double tensor converts to f64")
}

/// Copies `source` into `host`, a CPU tensor of its size and kind: one host sync. When
/// `source` is `host` itself (a model on the CPU) nothing moves, but the sync is
/// counted as the copy from a GPU would be.
pub fn copy_to_host(source: &Tensor, host: &Tensor) {
    count_sync();
    if source.data_ptr() != host.data_ptr() {
        let mut host = host.shallow_clone();
        host.copy_(source);
    }
}

/// Waits until `device` has run its queued work (on the CPU there is none): a host
/// sync, made only to time phases (--profile-phases).
pub fn synchronize(device: Device) {
    count_sync();
    if let Device::Cuda(index) = device {
        Cuda::synchronize(index as i64);
    }
}

/// `values` shaped `shape` on `device`, without a host sync: a copy to a GPU from
/// ordinary memory waits for the device's queued work, so it goes through pinned
/// memory and is queued behind that work instead.
pub fn upload(values: &[f32], shape: &[i64], device: Device) -> Tensor {
    let host = Tensor::from_slice(values).view(shape);
    match device {
        Device::Cpu => host,
        _ => pinned(&host, device).to_device_(device, Kind::Float, true, false),
    }
}

/// A copy of `host` in pinned memory, which `device` copies to and from directly. Not
/// tch's `pin_memory`: it always passes libtorch a device, and libtorch warns on every
/// call that passing one is deprecated; `_pin_memory` takes it without a word.
pub fn pinned(host: &Tensor, device: Device) -> Tensor {
    host.internal_pin_memory(device)
}

/// A device as flags and logs write it: `cpu`, `cuda:0`.
pub fn name(device: Device) -> String {
    match device {
        Device::Cuda(index) => format!("cuda:{index}"),
        Device::Cpu => "cpu".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Where `a3g train` puts what, on one line: worker i on `devices[i mod n]`, the test
/// agent on the last device, the shared model and optimizer on the CPU.
pub fn placement(devices: &[Device], workers: usize) -> String {
    let mut parts: Vec<String> = devices
        .iter()
        .filter_map(|&device| {
            let ranks: Vec<usize> =
                (0..workers).filter(|&rank| for_worker(devices, rank) == device).collect();
            let first = *ranks.first()?;
            let listed = match ranks.len() {
                1 => format!("worker {first}"),
                count if devices.len() == 1 => format!("workers {first}-{}", first + count - 1),
                _ => format!(
                    "workers {}",
                    ranks.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
                ),
            };
            Some(format!("{listed} on {}", name(device)))
        })
        .collect();
    if let Some(&last) = devices.last() {
        parts.push(format!("test agent on {}", name(last)));
    }
    parts.push("shared model and optimizer on cpu".into());
    format!("devices: {}", parts.join("; "))
}

/// What this process's libtorch can do with CUDA: whether its CUDA libraries are
/// loaded, the CUDA version they were built for, whether the NVIDIA driver is there,
/// and how many devices it sees.
#[derive(Clone, Debug)]
pub struct CudaReport {
    /// The folder of the libtorch_cpu.so this process loaded.
    pub libtorch_dir: Option<PathBuf>,
    /// That libtorch's version (`2.11.0+cu130`), read beside it: a Python wheel's
    /// torch/version.py or a libtorch archive's build-version.
    pub libtorch_version: Option<String>,
    /// The CUDA runtime version libtorch_cuda was built for, as (major, minor); `None`
    /// when libtorch_cuda is not loaded, so CUDA cannot be used at all.
    pub cuda_runtime: Option<(i64, i64)>,
    /// Whether the NVIDIA driver's library (libcuda.so) was loaded by the CUDA runtime
    /// when it looked for devices.
    pub driver_loaded: bool,
    /// CUDA devices visible to libtorch.
    pub devices: i64,
}

impl CudaReport {
    /// Asks libtorch, and this process's own memory map, what CUDA can do here. It
    /// initialises CUDA when its libraries are loaded, which takes a moment with a GPU.
    pub fn probe() -> Self {
        let cuda_runtime = tch::utils::has_cudart().then(|| {
            // CUDART_VERSION: 1000 * major + 10 * minor.
            let version = tch::utils::version_cudart();
            (version / 1000, version % 1000 / 10)
        });
        // Counting devices is what makes the CUDA runtime open the driver's library.
        let devices = if cuda_runtime.is_some() { Cuda::device_count() } else { 0 };
        // Which libraries are loaded, from the paths in this process's memory map (the
        // only field of a line that holds a '/').
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let mapped: Vec<&Path> = maps
            .lines()
            .filter_map(|line| line.find('/').map(|at| Path::new(&line[at..])))
            .collect();
        fn file_name(path: &Path) -> &str {
            path.file_name().and_then(|name| name.to_str()).unwrap_or("")
        }
        let driver_loaded = mapped.iter().any(|path| file_name(path).starts_with("libcuda.so"));
        let libtorch_dir = mapped
            .iter()
            .find(|path| file_name(path) == "libtorch_cpu.so")
            .and_then(|path| path.parent())
            .map(Path::to_path_buf);
        let libtorch_version = libtorch_dir.as_deref().and_then(libtorch_version);
        CudaReport { libtorch_dir, libtorch_version, cuda_runtime, driver_loaded, devices }
    }

    /// CUDA's state on one line, such as "CUDA libraries loaded (built for CUDA 13.0);
    /// no CUDA device (no driver: libcuda.so.1 is not installed)".
    pub fn summary(&self) -> String {
        let Some((major, minor)) = self.cuda_runtime else {
            return "no CUDA libraries loaded (a CPU-only libtorch, or a3g was linked without \
                    libtorch_cuda.so), so no CUDA device can be used"
                .into();
        };
        let libraries = format!("CUDA libraries loaded (built for CUDA {major}.{minor})");
        match (self.devices, self.driver_loaded) {
            (0, false) => format!(
                "{libraries}; no CUDA device (no driver: the NVIDIA driver's libcuda.so.1 is not installed)"
            ),
            (0, true) => format!(
                "{libraries}; no CUDA device (the NVIDIA driver is installed but reports none: \
                 check nvidia-smi and CUDA_VISIBLE_DEVICES)"
            ),
            (count, _) => {
                let names: Vec<String> = (0..count).map(|index| format!("cuda:{index}")).collect();
                format!("{libraries}; {count} CUDA device(s): {}", names.join(", "))
            }
        }
    }
}

/// The version of the libtorch in `lib_dir`, from the files its distributions put
/// beside the lib folder.
fn libtorch_version(lib_dir: &Path) -> Option<String> {
    let root = lib_dir.parent()?;
    let from_wheel = std::fs::read_to_string(root.join("version.py")).ok().and_then(|text| {
        let line = text.lines().find(|line| line.starts_with("__version__"))?;
        Some(line.split(['\'', '"']).nth(1)?.to_string())
    });
    from_wheel
        .or_else(|| std::fs::read_to_string(root.join("build-version")).ok())
        .map(|version| version.trim().to_string())
        .filter(|version| !version.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// -1 alone is the CPU; -1 among GPU ids, a repeated id or a negative id is
    /// refused with the flag as given, whether or not this machine has GPUs.
    #[test]
    fn gpu_id_lists_are_checked() {
        assert_eq!(select_list(&[-1]).unwrap(), [Device::Cpu]);
        assert_eq!(select(-1).unwrap(), Device::Cpu);
        let message = |ids: &[i64]| select_list(ids).unwrap_err().to_string();
        assert!(message(&[-1, 0]).contains("--gpu-ids -1 0: -1 (the CPU) cannot be mixed"));
        assert!(message(&[1, 1]).contains("GPU 1 is listed twice"));
        assert!(message(&[-2]).contains("GPU ids start at 0"));
        let beyond = message(&[99]);
        assert!(beyond.contains("--gpu-ids 99") && beyond.contains("-1"), "{beyond}");
    }

    /// The files that train, test and evaluate models move values between host and
    /// device only through this module (outside their tests), so [`host_syncs`]
    /// counts every sync they make, and uploads cannot wait on a GPU unseen.
    #[test]
    fn models_are_read_only_through_this_module() {
        let files = [
            ("a3c/worker.rs", include_str!("a3c/worker.rs")),
            ("eval.rs", include_str!("eval.rs")),
            ("ga3c/agent.rs", include_str!("ga3c/agent.rs")),
            ("ga3c/predictor.rs", include_str!("ga3c/predictor.rs")),
            ("ga3c/segment.rs", include_str!("ga3c/segment.rs")),
            ("ga3c/trainer.rs", include_str!("ga3c/trainer.rs")),
            ("gradients.rs", include_str!("gradients.rs")),
            ("model/mod.rs", include_str!("model/mod.rs")),
            ("model/lstm.rs", include_str!("model/lstm.rs")),
            ("model/a3clstm.rs", include_str!("model/a3clstm.rs")),
            ("model/universe.rs", include_str!("model/universe.rs")),
            ("model/mlp.rs", include_str!("model/mlp.rs")),
            ("policy.rs", include_str!("policy.rs")),
            ("rollout.rs", include_str!("rollout.rs")),
            ("shared.rs", include_str!("shared.rs")),
            ("test_agent.rs", include_str!("test_agent.rs")),
        ];
        let bypasses =
            ["double_value(", "int64_value(", "f64_value(", "try_from(", "try_into(", "to_device("];
        for (file, source) in files {
            let code = source.split("#[cfg(test)]").next().unwrap_or_default();
            for bypass in bypasses {
                assert!(!code.contains(bypass), "{file} calls {bypass}) outside crate::device");
            }
        }
    }

    /// The placement line follows the reference's mapping: worker i on ids[i mod n],
    /// the test agent on the last id, the shared model on the CPU.
    #[test]
    fn placement_names_each_workers_device() {
        assert_eq!(
            placement(&[Device::Cpu], 16),
            "devices: workers 0-15 on cpu; test agent on cpu; shared model and optimizer on cpu"
        );
        assert_eq!(
            placement(&[Device::Cuda(0), Device::Cuda(1)], 5),
            "devices: workers 0, 2, 4 on cuda:0; workers 1, 3 on cuda:1; test agent on cuda:1; \
             shared model and optimizer on cpu"
        );
        assert_eq!(
            placement(&[Device::Cuda(0), Device::Cuda(1)], 1),
            "devices: worker 0 on cuda:0; test agent on cuda:1; shared model and optimizer on cpu"
        );
    }
}
