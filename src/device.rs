//! Choosing where models run from the GPU flags, with a clear refusal when a GPU
//! asked for is not there.

use tch::{Cuda, Device};

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
    let count = Cuda::device_count();
    if count == 0 || !Cuda::is_available() {
        return Err(refuse(
            "no CUDA device is available on this machine (or libtorch was built without CUDA); \
             pass -1 to run on the CPU"
                .into(),
        ));
    }
    if gpu_id >= count {
        let found: Vec<String> = (0..count).map(|index| format!("cuda:{index}")).collect();
        return Err(refuse(format!(
            "GPU {gpu_id} does not exist; this machine has {count} CUDA device(s): {}; \
             pick among them, or -1 for the CPU",
            found.join(", ")
        )));
    }
    Ok(Device::Cuda(gpu_id as usize))
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
}
