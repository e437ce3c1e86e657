package place

import "golang.org/x/sys/unix"

// namelen is the longest name the file system of dir says it takes
// (statfs's f_namelen).
func namelen(dir string) (int, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int(st.Namelen), nil
}
