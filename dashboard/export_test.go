package dashboard

// Rescan has the dashboard's watches list every folder now, as their
// safety rescan does each minute.
func (d *Dashboard) Rescan() { d.hub.watcher.RescanAll() }
