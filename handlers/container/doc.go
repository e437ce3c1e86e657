// Package container unpacks a depositor's zip container into a folder,
// safely: nothing is ever written outside the folder, and a zip bomb stops
// at a limit instead of filling the disk.
//
// [Extract] checks every entry before it writes anything: names must be
// safe relative paths ([checkm.CleanName]), entries must be regular files
// or folders (no symbolic links, devices or encrypted entries), stored or
// deflated (the methods archive/zip reads), no name may repeat or be both
// a file and a folder, there must be a file, and the sizes the headers
// claim must fit [Limits] (and its Fits, the room where they go). It then
// writes through an [os.Root] on the folder, so even a symbolic link
// already in the folder cannot lead outside it, and counts the bytes
// actually written against the same limits, since a header may lie.
//
// Names are kept as they are: a container whose files all sit in one
// top-level folder extracts into that folder.
package container
