// flame.js - the script svg.c inlines into every flame graph: click a box to
// zoom into it (its ancestors stretch across the width), "Reset zoom" to go
// back, "Search" to highlight the functions matching a regular expression
// and show their share (a box inside another match counted once). Everything
// it needs is in the SVG: each box is a <g class="f"> whose data-o, data-v
// and data-d are its offset and width in the graph's unit and its depth,
// and whose <title> starts with the function's name; the root's data-*
// attributes give svg.c's layout constants.
// Never: change the figures written in the titles or the header (the SVG
// must say the same with or without this script), or fetch anything.
"use strict";
var HIGHLIGHT = "rgb(230,0,230)";     // a box the search matched
var ELLIPSIS = "..";                  // ends a label cut to fit, as svg.c's
var root, boxes, width, pad, total, charPx, minPx, inset, labelMin;

function init() {
	root = document.documentElement;
	boxes = Array.prototype.slice.call(document.querySelectorAll("g.f"));
	width = +root.getAttribute("data-graph-width");
	pad = +root.getAttribute("data-pad");
	total = +root.getAttribute("data-total");
	charPx = +root.getAttribute("data-char-px");
	minPx = +root.getAttribute("data-min-px");
	inset = +root.getAttribute("data-inset");
	labelMin = +root.getAttribute("data-label-min");
	boxes.forEach(function (g) {
		g.addEventListener("click", function () { zoom(g); });
	});
	document.getElementById("reset").addEventListener("click", reset);
	document.getElementById("search").addEventListener("click", search);
}

function nameOf(g) {
	return g.querySelector("title").textContent.split("\n")[0];
}

function place(g, x, w) {
	var r = g.querySelector("rect"), t = g.querySelector("text");
	g.style.display = w < minPx ? "none" : "";
	r.setAttribute("x", x.toFixed(2));
	r.setAttribute("width", w.toFixed(2));
	t.setAttribute("x", (x + inset).toFixed(2));
	var fit = Math.floor((w - 2 * inset) / charPx), name = nameOf(g);
	t.textContent = fit < labelMin ? "" : name.length <= fit ? name :
		name.slice(0, fit - ELLIPSIS.length) + ELLIPSIS;
}

function zoom(z) {
	var o = +z.getAttribute("data-o"), v = +z.getAttribute("data-v");
	var d = +z.getAttribute("data-d");
	if (!v)
		return;
	boxes.forEach(function (g) {
		var go = +g.getAttribute("data-o"), gv = +g.getAttribute("data-v");
		var gd = +g.getAttribute("data-d");
		if (gd < d && go <= o && go + gv >= o + v) {
			place(g, pad, width);
			g.style.opacity = "0.6";
		} else if (gd >= d && go >= o && go + gv <= o + v) {
			place(g, pad + (go - o) / v * width, gv / v * width);
			g.style.opacity = "";
		} else {
			g.style.display = "none";
		}
	});
	document.getElementById("reset").style.display = "";
}

function reset() {
	boxes.forEach(function (g) {
		var go = +g.getAttribute("data-o"), gv = +g.getAttribute("data-v");
		place(g, pad + (total ? go / total * width : 0), total ? gv / total * width : 0);
		g.style.opacity = "";
	});
	document.getElementById("reset").style.display = "none";
}

function search() {
	var term = window.prompt("Search (a regular expression; empty: clear)", "");
	if (term === null)
		return;
	var re = term ? new RegExp(term) : null, hits = [];
	boxes.forEach(function (g) {
		var r = g.querySelector("rect");
		if (!r.hasAttribute("data-fill"))
			r.setAttribute("data-fill", r.getAttribute("fill"));
		var hit = re !== null && re.test(nameOf(g));
		r.setAttribute("fill", hit ? HIGHLIGHT : r.getAttribute("data-fill"));
		if (hit)
			hits.push([+g.getAttribute("data-o"), +g.getAttribute("data-v")]);
	});
	hits.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
	var sum = 0, end = -1;
	hits.forEach(function (h) {
		if (h[0] >= end) {
			sum += h[1];
			end = h[0] + h[1];
		}
	});
	document.getElementById("matched").textContent = re === null ? "" :
		"Matched: " + sum + " (" + (total ? (100 * sum / total).toFixed(1) : "0.0") + "%)";
}
