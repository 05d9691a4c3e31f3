//! Choosing where a model runs from the GPU flags, with a clear refusal when the
//! GPU asked for is not there.

use tch::{Cuda, Device};

use crate::error::{Error, Result};

/// The device for `--gpu-id`: -1 is the CPU, 0 and up a CUDA device that must exist.
pub fn select(gpu_id: i64) -> Result<Device> {
    if gpu_id == -1 {
        return Ok(Device::Cpu);
    }
    let refuse = |problem: String| Error::BadArguments(format!("--gpu-id {gpu_id}: {problem}"));
    if gpu_id < -1 {
        return Err(refuse("GPU ids start at 0; -1 runs on the CPU".into()));
    }
    let count = Cuda::device_count();
    if count == 0 || !Cuda::is_available() {
        return Err(refuse(
            "no CUDA device is available on this machine (or libtorch was built without CUDA); \
             pass --gpu-id -1 to run on the CPU"
                .into(),
        ));
    }
    if gpu_id >= count {
        let found: Vec<String> = (0..count).map(|index| format!("cuda:{index}")).collect();
        return Err(refuse(format!(
            "this machine has {count} CUDA device(s): {}; pick one of them, or -1 for the CPU",
            found.join(", ")
        )));
    }
    Ok(Device::Cuda(gpu_id as usize))
}
