// Loaded between RequireJS and the widget manager (see _config.yml, nb_ipywidgets_js).
(function () {
  "use strict";
  // 1. The widget manager's bundle finds its icon fonts next to the module it is loaded as; point
  //    that module at this folder, so the fonts come from the book and not from a CDN.
  var src = document.currentScript && document.currentScript.src;
  if (src && window.require && window.require.config) {
    var folder = src.slice(0, src.lastIndexOf("/"));
    window.require.config({ paths: { "@jupyter-widgets/html-manager/dist": folder } });
  }
  // 2. The manager typesets widget labels through MathJax 2's MathJax.Hub.Queue; the book runs
  //    MathJax 3, which has typesetPromise instead. Give every MathJax object a Hub that forwards.
  var hub = {
    Queue: function (job) {
      var mathjax = window.MathJax;
      var element = Array.isArray(job) ? job[2] : undefined;
      if (element && mathjax && typeof mathjax.typesetPromise === "function") {
        mathjax.typesetPromise([element]).catch(function (error) {
          console.warn("MathJax could not typeset a widget label:", error);
        });
      }
      // Before MathJax has started, its first pass over the page typesets the labels.
    },
  };
  var current = window.MathJax;
  function withHub(value) {
    if (value && typeof value === "object" && !value.Hub) {
      value.Hub = hub;
    }
    return value;
  }
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); },
  });
  withHub(current);
})();
