// The tab strip (WAI-ARIA tabs pattern): arrow keys, Home and End move between tabs, the
// URL hash names the open tab so a reload keeps it.

export function initTabs(onShow) {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  const select = (tab, focus = false) => {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (focus) tab.focus();
    const name = tab.id.replace("tab-", "");
    history.replaceState(null, "", `#${name}`);
    onShow(name);
  };
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (e) => {
      const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (next === undefined) return;
      e.preventDefault();
      select(tabs[(next + tabs.length) % tabs.length], true);
    });
  });
  const start = tabs.find((t) => t.id === `tab-${location.hash.slice(1)}`) || tabs[0];
  select(start);
}
