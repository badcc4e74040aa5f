"""The page's inline CSS and plain JS (no library). The JS only adds: table sorting, hover values on the
charts, plain/conditioned toggles and layer/head pickers; without it every table, chart and panel is in the
static HTML."""

from __future__ import annotations

CSS = """
:root{--fg:#1d1f23;--muted:#5b6270;--line:#d9dde3;--bg:#fff;--soft:#f5f7fa;--accent:#3558a8}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:var(--fg);background:var(--bg)}
header.top{padding:12px 28px 6px;border-bottom:1px solid var(--line);background:var(--soft)}
header.top h1{margin:0 0 4px;font-size:21px}
.top-row{display:flex;flex-wrap:wrap;align-items:flex-start;gap:4px 24px}
.top-text{flex:1 1 560px;min-width:0}
header.top .kv{font-size:13px;gap:0 12px;margin:2px 0}
header.top .headline{margin:2px 0}
details.more{margin:2px 0 0;font-size:13px}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0;font-size:13.5px}
.kv dt{color:var(--muted)}.kv dd{margin:0;overflow-wrap:anywhere}
.layout{display:flex;align-items:flex-start}
nav.toc{position:sticky;top:0;min-width:170px;max-width:200px;padding:16px 12px;font-size:13.5px;
border-right:1px solid var(--line);max-height:100vh;overflow:auto}
nav.toc ol{padding-left:18px;margin:0}nav.toc a{color:var(--accent);text-decoration:none}
main{flex:1;min-width:0;padding:8px 24px 40px}
section{margin:18px 0 30px}
h2{font-size:19px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:16px;margin:18px 0 6px}
.lead{color:var(--muted);margin:4px 0 10px}
.headline{display:flex;flex-wrap:wrap;gap:12px;margin:10px 0}
.headline>div{border:1px solid var(--line);border-radius:6px;padding:6px 14px;background:#fff}
.headline b{display:block;font-size:20px}
.headline span{color:var(--muted);font-size:13px}
div.pair{display:flex;flex-wrap:wrap;gap:8px 24px;align-items:flex-start}
div.pair>figure.fig{flex:1 1 100%;min-width:0}
div.pair>figure.heat{flex:0 1 auto}
div.pair>.table-wrap{flex:0 1 auto}
.meta{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:10px;margin:8px 0}
.meta>div{border:1px solid var(--line);border-radius:6px;padding:2px 12px;background:#fff}
.meta h3{margin:6px 0 2px;font-size:14px}
figure.fig{margin:8px 0;overflow-x:auto}
svg{font-family:inherit;max-width:100%;height:auto}
svg.chart{width:100%}
svg .plotbg{fill:#fff;stroke:#999}
svg .grid{stroke:#e3e3e3;stroke-width:1}
svg .tick{font-size:14px;fill:#444}
svg .label{font-size:15px;fill:#222}
svg .ctitle{font-size:16px;font-weight:600;fill:#222}
svg .leg{font-size:14px;fill:#222}
svg .reflabel{font-size:14px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg.heatmap .tick{font-size:12px}svg.heatmap .ctitle{font-size:14px}
svg .cellv{font-size:9.5px;pointer-events:none}
svg .cell:hover rect{stroke:#09f;stroke-width:2}
svg polyline.line:hover{stroke-width:3.5}
.hidden-group{display:none}
.table-wrap{overflow-x:auto;margin:8px 0}
table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums}
caption{text-align:left;color:var(--muted);padding:4px 0;caption-side:top}
th,td{border:1px solid var(--line);padding:3px 6px;text-align:left}
th sub,th sup{line-height:0}
input.fold{margin:0 4px 0 0}label.fold{font-size:13px;color:var(--accent);cursor:pointer}
input.fold:not(:checked)~.table-wrap .folded{display:none}
th,td.num{white-space:nowrap}
td{white-space:normal;overflow-wrap:break-word}
td.num{text-align:right}
.pass{color:#1a7f37;font-weight:600}.fail{color:#b42318;font-weight:600}
p.verdict{padding:8px 14px;border-radius:6px;font-size:17px;color:var(--fg);font-weight:400}
p.verdict.pass{background:#e6f4ea;border:1px solid #1a7f37}
p.verdict.fail{background:#fdecea;border:1px solid #b42318}
th{background:var(--soft);position:sticky;top:0}
.js table.sortable th{cursor:pointer}
.js table.sortable th:after{content:" \\2195";color:#aaa;font-size:11px}
th[aria-sort=ascending]:after{content:" \\25B2"!important;color:var(--fg)!important}
th[aria-sort=descending]:after{content:" \\25BC"!important;color:var(--fg)!important}
tbody tr:hover{background:#eef3ff}
.footnote{font-size:12.5px;color:var(--muted);margin:4px 0;max-width:900px}
.missing{color:var(--muted);font-style:italic}
.controls{margin:6px 0;font-size:13.5px}
.controls label{margin-right:14px}
.nojs .js-only{display:none}
details{margin:6px 0}summary{cursor:pointer;color:var(--accent)}
dl.glossary dt{font-weight:600;margin-top:6px}dl.glossary dd{margin:0 0 0 18px}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:4px 7px;
border-radius:4px;white-space:pre;display:none;z-index:9}
footer{color:var(--muted);font-size:12px;padding:10px 28px;border-top:1px solid var(--line)}
@media (max-width:900px){.layout{display:block}nav.toc{position:static;max-width:none;max-height:none;
border-right:0;border-bottom:1px solid var(--line)}nav.toc ol{columns:2}main{padding:8px 14px 30px}}
@media print{nav.toc{display:none}input.fold,label.fold{display:none}}
"""

JS = r"""
(function(){
var d=document;d.documentElement.className=d.documentElement.className.replace('nojs','js');
function val(td){var v=td.getAttribute('data-value');if(v===null)return null;
 if(v==='')return NaN;return Number(v);}
d.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('thead th').forEach(function(th,col){
  th.addEventListener('click',function(){
   var asc=th.getAttribute('aria-sort')!=='ascending';
   t.querySelectorAll('thead th').forEach(function(o){o.removeAttribute('aria-sort');});
   th.setAttribute('aria-sort',asc?'ascending':'descending');
   var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
   rows.sort(function(a,b){
    var x=a.cells[col],y=b.cells[col];if(!x||!y)return 0;
    var vx=val(x),vy=val(y),r;
    if(vx!==null&&vy!==null){if(isNaN(vx))return 1;if(isNaN(vy))return -1;r=vx<vy?-1:vx>vy?1:0;}
    else{r=x.textContent.localeCompare(y.textContent,undefined,{numeric:true});}
    return asc?r:-r;});
   rows.forEach(function(r){body.appendChild(r);});
  });});});
d.querySelectorAll('[data-toggle]').forEach(function(box){
 var fig=d.getElementById(box.getAttribute('data-target')),g=box.getAttribute('data-toggle');
 function apply(){if(!fig)return;fig.querySelectorAll('[data-group="'+g+'"]').forEach(function(e){
  e.classList.toggle('hidden-group',!box.checked);});}
 box.addEventListener('change',apply);apply();});
d.querySelectorAll('select[data-picker]').forEach(function(sel){
 var box=d.getElementById(sel.getAttribute('data-picker'));
 function apply(){if(!box)return;box.querySelectorAll(':scope > [data-pick]').forEach(function(p){
  var on=sel.value==='*'||p.getAttribute('data-pick')===sel.value;
  p.classList.toggle('hidden-group',!on);if(on&&p.tagName==='DETAILS')p.open=true;});}
 sel.addEventListener('change',apply);apply();});
var tip=d.createElement('div');tip.id='tip';d.body.appendChild(tip);
function nums(s){return s.split(' ').map(Number);}
function fmt(v){return isFinite(v)?String(v):(isNaN(v)?'—':'inf');}
d.querySelectorAll('svg.chart').forEach(function(svg){
 var plot=nums(svg.getAttribute('data-plot')),xd=svg.getAttribute('data-x').split(' ');
 var lo=Number(xd[0]),hi=Number(xd[1]),lg=xd[2]==='log';
 function inv(px){var t=(px-plot[0])/plot[2];
  if(lg){return Math.pow(10,Math.log10(lo)+t*(Math.log10(hi)-Math.log10(lo)));}
  return lo+t*(hi-lo);}
 svg.addEventListener('mousemove',function(ev){
  var r=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal,px=(ev.clientX-r.left)*vb.width/r.width;
  if(px<plot[0]||px>plot[0]+plot[2]){tip.style.display='none';return;}
  var x=inv(px),lines=[],seen={};
  svg.querySelectorAll('g.series').forEach(function(g){
   if(g.classList.contains('hidden-group')||g.closest('.hidden-group'))return;
   var pl=g.querySelector('polyline');if(!pl)return;var name=g.getAttribute('data-name');
   if(seen[name])return;
   if(!pl.hasAttribute('data-ys'))return;seen[name]=1;
   var ys=pl.getAttribute('data-ys').split(' ').map(Number),b=0;
   var xs=pl.hasAttribute('data-xs')?nums(pl.getAttribute('data-xs')):ys.map(function(_,i){return i+1;});
   for(var i=1;i<xs.length;i++){if(Math.abs(xs[i]-x)<Math.abs(xs[b]-x))b=i;}
   if(lines.length<14)lines.push(name+' @ '+xs[b]+': '+fmt(ys[b]));});
  if(!lines.length){tip.style.display='none';return;}
  tip.textContent=lines.join('\n');tip.style.display='block';
  tip.style.left=(ev.clientX+14)+'px';tip.style.top=(ev.clientY+10)+'px';});
 svg.addEventListener('mouseleave',function(){tip.style.display='none';});
});
})();
"""
