//! Link-time set-up that the dependencies leave to the final binary.
//!
//! - ALE (through ale-sys) is C++ compiled into a static library, so whoever links it
//!   must also link the C++ runtime.
//! - torch-sys links libtorch dynamically but embeds no search path in our binaries;
//!   an rpath to the libtorch it built against lets `target/release/a3g` and the test
//!   binaries start without LD_LIBRARY_PATH.

fn main() {
    println!("cargo:rustc-link-lib=stdc++");
    // torch-sys declares `links = "tch"` and exports the folder it linked against.
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(libtorch_lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        // --disable-new-dtags writes RPATH rather than RUNPATH: RPATH is searched before
        // LD_LIBRARY_PATH, so another libtorch there cannot be picked up by accident,
        // while a binary whose checkout moved still falls back to LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg=-Wl,--disable-new-dtags,-rpath,{libtorch_lib}");
    }
}
