// A line plot in an SVG element (viewBox 480x180): each series is {label, points: [[x, y]]}.
// Axis ends are labelled with the data's range; no library, the plots are small.

const NS = "http://www.w3.org/2000/svg";
const W = 480, H = 180, LEFT = 44, RIGHT = 8, TOP = 10, BOTTOM = 22;
const COLOURS = ["#2f6fde", "#d9622b", "#2a9d5b", "#8a4fd0"];

function el(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(v) {
  if (Math.abs(v) >= 1000) return v.toFixed(0);
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export function linePlot(svg, series, { xLabel = "", yMin = undefined, yMax = undefined } = {}) {
  svg.replaceChildren();
  const all = series.flatMap((s) => s.points);
  svg.append(el("line", { x1: LEFT, y1: H - BOTTOM, x2: W - RIGHT, y2: H - BOTTOM, class: "axis" }));
  svg.append(el("line", { x1: LEFT, y1: TOP, x2: LEFT, y2: H - BOTTOM, class: "axis" }));
  if (all.length === 0) {
    svg.append(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no data yet"));
    return;
  }
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  let y0 = yMin ?? Math.min(0, ...ys), y1 = yMax ?? Math.max(...ys);
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const sx = (x) => LEFT + ((x - x0) / (x1 - x0)) * (W - LEFT - RIGHT);
  const sy = (y) => H - BOTTOM - ((y - y0) / (y1 - y0)) * (H - TOP - BOTTOM);
  svg.append(el("text", { x: LEFT - 4, y: TOP + 8, "text-anchor": "end" }, fmt(y1)));
  svg.append(el("text", { x: LEFT - 4, y: H - BOTTOM, "text-anchor": "end" }, fmt(y0)));
  svg.append(el("text", { x: LEFT, y: H - 6 }, fmt(x0)));
  svg.append(el("text", { x: W - RIGHT, y: H - 6, "text-anchor": "end" }, `${fmt(x1)} ${xLabel}`));
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    const colour = COLOURS[i % COLOURS.length];
    const d = s.points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" ");
    svg.append(el("polyline", { points: d, fill: "none", stroke: colour, "stroke-width": 2, "data-series": s.label }));
    if (s.points.length === 1) {
      svg.append(el("circle", { cx: sx(s.points[0][0]), cy: sy(s.points[0][1]), r: 3, fill: colour }));
    }
    if (series.length > 1) {
      svg.append(el("text", { x: LEFT + 8 + i * 90, y: TOP + 8, fill: colour }, s.label));
    }
  });
}
