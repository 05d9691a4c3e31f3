//! Reading the files a user names: regular files only, so that a path to a device or
//! a pipe (a symlink to /dev/zero, say) is refused at once instead of read without end.

use std::io;
use std::path::Path;

/// The bytes of the regular file at `path`, symlinks followed.
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    ensure_regular(path)?;
    std::fs::read(path)
}

/// The text of the regular file at `path`, symlinks followed.
pub fn read_regular_to_string(path: &Path) -> io::Result<String> {
    ensure_regular(path)?;
    std::fs::read_to_string(path)
}

fn ensure_regular(path: &Path) -> io::Result<()> {
    let metadata = std::fs::metadata(path)?;
    if metadata.is_file() {
        Ok(())
    } else if metadata.is_dir() {
        Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a folder"))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is a device, pipe or socket, not a regular file",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("a3g-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("log");
        std::fs::write(&file, "a line\n").unwrap();
        let link = dir.join("zeros");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert_eq!(read_regular_to_string(&file).unwrap(), "a line\n");
        assert_eq!(read_regular(&file).unwrap(), b"a line\n");
        let device = read_regular(&link).unwrap_err();
        assert_eq!(device.kind(), io::ErrorKind::InvalidInput, "{device}");
        assert!(device.to_string().contains("not a regular file"), "{device}");
        let folder = read_regular_to_string(&dir).unwrap_err();
        assert_eq!(folder.kind(), io::ErrorKind::IsADirectory, "{folder}");
        let missing = read_regular(&dir.join("missing")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
