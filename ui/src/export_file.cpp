// Exports rendered into memory and written atomically (export_file.h).
#include "export_file.h"

#include <QBuffer>
#include <QByteArray>
#include <QPainter>
#include <QSvgGenerator>

#include "snip/atomic_file.h"
#include "snip/error.h"

namespace snip::ui {

void write_png_file(const QPixmap& pixmap, const QString& path) {
  const std::string target = snip::checked_write_target(path.toStdString());  // refused before rendering
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (!pixmap.save(&buffer, "PNG")) throw snip::Error("could not encode the image for " + path.toStdString());
  snip::write_file_atomic(target, bytes.constData(), size_t(bytes.size()));
}

void write_svg_file(const QSize& size, const QString& title, const std::function<void(QPainter&)>& render,
                    const QString& path) {
  const std::string target = snip::checked_write_target(path.toStdString());
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  {
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size);
    generator.setViewBox(QRect(QPoint(0, 0), size));
    generator.setTitle(title);
    QPainter painter;
    if (!painter.begin(&generator)) throw snip::Error("could not render the SVG for " + path.toStdString());
    render(painter);
    painter.end();
  }
  snip::write_file_atomic(target, bytes.constData(), size_t(bytes.size()));
}

}  // namespace snip::ui
